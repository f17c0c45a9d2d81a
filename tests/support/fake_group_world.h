// A multi-node world in one process (docs/testing.md, "The fake group
// world"): N real group agents (RunGroupAgent, agent/group/group_agent.h) on one
// in-memory store and one FakeClock, each node with its own fake metadata
// service, fake Auto Scaling, checkpoint dir and fake trainer.
//
// Every agent runs on a thread of its own, but only one thread runs at a
// time: the world hands a turn to each live node in order, the node runs
// until its loop waits (ports.idle) and hands the turn back; then the world
// runs the store calls the node's loop posted (ports.loop_calls) on its own
// thread, which the loop takes the results of on its next turn. Once every
// node had its turn, the world moves the clock by one tick and steps the
// trainers. The interleaving is therefore the same on every run, whatever
// the machine's load, and a minute of the group's time takes milliseconds.
// Uploads and restores run on the agents' loops (ports.inline_store_work),
// so no other thread exists.
//
// A node's store can be frozen (the calls its loop posted wait, and the
// loop and the rest of the world go on), delayed, failed by key, or killed
// (every call fails and the node is never given a turn again, as after
// kill -9 of its instance).
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <semaphore>
#include <string>
#include <thread>
#include <vector>

#include "agent/config/config.h"
#include "agent/run/daemon.h"
#include "common/sd_notify.h"
#include "tests/support/agent_fakes.h"
#include "tests/support/fake_clock.h"
#include "tests/support/memory_store.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {

// One thread runs at a time: the world's (turn -1) or one node's.
class Baton {
 public:
  // The world: lets `who` run until it yields or ends.
  void Pass(int who);
  // A node: hands the turn back to the world and waits for its next.
  void Yield(int me);
  // A node's thread, before its first step.
  void Await(int me);
  // A node's thread, at its end.
  void Done();

 private:
  std::binary_semaphore& Gate(int who);

  std::mutex mu_;  // guards gates_
  std::map<int, std::unique_ptr<std::binary_semaphore>> gates_;
  std::binary_semaphore world_{0};
};

// What every node's trainer does (after tests/tools/group_trainer.py): a
// step every `step_time` once every rank of its round runs (they step
// together, as ranks of one collective do), step_<n>.pt every `save_every`
// steps holding "rank step total", where total depends on every step
// before; final "rank steps total" and exit 0 after `steps`.
struct TrainerPlan {
  int steps = 40;
  std::chrono::milliseconds step_time{200};
  // 0: only when asked (checkpoint_signal): every rank saves at the next
  // step after any rank was asked, as ranks that all-reduce the flag do.
  int save_every = 5;
  // Rank `fail_rank` exits 3 at step `fail_at` (every time, or only the
  // first time with fail_once).
  std::optional<int> fail_at;
  int fail_rank = 0;
  bool fail_once = false;
  // A trainer resumed from this step exits 3 at once (a checkpoint it
  // cannot resume from: docs/multi-node.md).
  std::optional<int64_t> poisoned_resume_step;
  // No checkpoint after this step, periodic, asked for or last (a trainer
  // whose save hangs, or that ignores the request).
  std::optional<int64_t> last_save_step;
};

// The "total" an uninterrupted run of rank `rank` ends with after `steps`.
int64_t ExpectedTotal(int rank, int steps);

class FakeGroupWorld;

// A node's view of the shared store: faults for this node only. A call made
// on the agent's loop waits while frozen or delayed, and the rest of the
// world goes on meanwhile. A call made on another thread (the snapshot
// writer's and the restore's workers, which the loop waits for) fails at
// once while the store is frozen, as a request that timed out, and is not
// delayed: only one thread of a node may wait for the world's turns.
class NodeStore final : public ObjectStore {
 public:
  NodeStore(ObjectStore& base, Clock& clock, std::function<void()> yield)
      : base_(base), clock_(clock), yield_(std::move(yield)) {}
  // The agent's loop thread: the one whose calls wait.
  void SetLoopThread(std::thread::id id) { loop_ = id; }
  // Calls wait until Thaw: the loop's posted calls are not run, and a call
  // on the loop itself (an upload's, a restore's) holds it.
  void Freeze() { frozen_ = true; }
  void Thaw() { frozen_ = false; }
  bool frozen() const { return frozen_; }
  // Every call takes this much of the world's time.
  void Delay(std::chrono::milliseconds d) { delay_ = d; }
  std::chrono::milliseconds delay() const { return delay_; }
  // Calls on keys containing `fragment` fail (Unavailable) while set.
  void FailKeysWith(std::string fragment) { fail_fragment_ = std::move(fragment); }
  // Every call fails from now on.
  void Die() { dead_ = true; }
  // The first Put of a key containing `fragment` does not land: the
  // instance dies just before it (`on_die` runs, then every call fails).
  void DieAtPutOf(std::string fragment, std::function<void()> on_die) {
    die_fragment_ = std::move(fragment);
    on_die_ = std::move(on_die);
  }

  StatusOr<std::string> Put(const std::string& key, std::string_view data,
                            const PutCondition& condition) override;
  StatusOr<std::string> Get(const std::string& key, std::optional<ByteRange> range,
                            ObjectInfo* info) override;
  StatusOr<ObjectInfo> Head(const std::string& key) override;
  StatusOr<ListPage> List(const std::string& prefix, const std::string& token,
                          int max_keys) override;
  Status Delete(const std::string& key) override;
  StatusOr<std::unique_ptr<ObjectWriter>> NewWriter(const std::string& key,
                                                    uint64_t size_hint = 0) override;
  StatusOr<int> CleanStaleWrites(const std::string& prefix, std::chrono::seconds age,
                                 const KeyFilter& spare) override;
  std::string Describe() const override { return "node(" + base_.Describe() + ")"; }

 private:
  Status Gate(const std::string& key);

  ObjectStore& base_;
  Clock& clock_;
  std::function<void()> yield_;
  std::thread::id loop_;
  std::atomic<bool> frozen_{false};
  std::atomic<bool> dead_{false};
  std::chrono::milliseconds delay_{0};
  std::string fail_fragment_;
  std::string die_fragment_;
  std::function<void()> on_die_;
};

class WorldTrainer;

// One agent's run on one instance. A replacement is a new WorldNode in the
// same slot, with a new instance id and an empty checkpoint dir.
struct WorldNode {
  int id = 0;    // the baton's
  int slot = 0;  // which node of the world
  std::string instance;
  std::string ckpt;
  Config config;
  std::map<std::string, std::string> env;
  SystemdNotifier notifier{env};
  std::unique_ptr<FakeMetadata> imds;
  FakeAutoScaling autoscaling;
  std::unique_ptr<NodeStore> store;
  std::unique_ptr<TrainerLauncher> launcher;
  std::vector<TrainerLaunch> launches;
  std::vector<int> signals;          // every signal its trainers got
  std::optional<std::string> final;  // "rank step total" once its trainer finished
  WorldTrainer* trainer = nullptr;   // the running one, if any
  bool stop_requested = false;       // a SIGTERM for the agent
  bool dead = false;                 // killed: never scheduled again
  // The store calls its loop posted (ports.loop_calls), run by the world,
  // and when the next may run (NodeStore::Delay).
  std::deque<std::function<void()>> calls;
  Clock::MonoTime calls_ready{};
  std::atomic<bool> done{false};
  AgentResult result;
  std::thread thread;
};

class FakeGroupWorld {
 public:
  // `nodes` nodes of job "job", each with the flags of docs/testing.md's
  // fake world plus `flags` (config keys, e.g. {"upload_interval", "5s"}).
  explicit FakeGroupWorld(int nodes, std::map<std::string, std::string> flags = {});
  ~FakeGroupWorld();

  FakeClock clock;
  MemoryStore store{&clock};
  TrainerPlan trainer;
  bool trainer_failed_once = false;  // TrainerPlan::fail_once: the one failure happened
  // Set: every node runs on a g5.xlarge spot instance in us-east-1a and reads
  // its prices with these (AgentPorts::prices).
  std::optional<PriceReaders> prices;

  // Starts an agent in `slot` on a new instance ("i-<slot>-<n>"), with an
  // empty checkpoint dir; `flags` on top of the world's (a config that does
  // not load fails the test).
  WorldNode& Start(int slot, const std::map<std::string, std::string>& flags = {});
  void StartAll();
  // The newest run in `slot`.
  WorldNode& node(int slot) { return *current_.at(slot); }
  // Kill -9 of the instance: its store calls fail, its trainer dies, and it
  // is never given a turn again.
  void Kill(int slot);
  // Kill(slot) at the moment its agent first writes a key containing `fragment`
  // (the write does not land).
  void KillAtPutOf(int slot, const std::string& fragment);
  // The slot whose agent holds the lease (coordinates); nullopt when none does.
  std::optional<int> Coordinator();
  // Runs `step` once the world's time is `offset` from its start.
  void At(std::chrono::milliseconds offset, std::function<void()> step);
  std::chrono::milliseconds Elapsed();
  // Ticks until `done` holds or `limit` of the world's time passed; whether it holds.
  bool RunUntil(const std::function<bool()>& done, std::chrono::milliseconds limit);
  // Until every node in `slots` (every current node when empty) has exited.
  bool RunUntilExited(std::chrono::milliseconds limit, std::vector<int> slots = {});
  // One tick: every live node's turn, then 100 ms, the trainers and the script.
  void Tick();

  // The store's group records.
  std::vector<uint64_t> GroupSeqs();  // the group snapshots committed, oldest first
  std::optional<int64_t> NewestGroupStep();
  std::vector<std::string> EndReasons(uint64_t round);
  uint64_t NewestRound();

  // What the trainers share (WorldTrainer).
  struct Round {
    int nnodes = 0;
    std::map<int, WorldTrainer*> ranks;
    Clock::MonoTime next_step{};
  };
  std::map<uint64_t, Round>& rounds() { return rounds_; }

 private:
  void StepTrainers();
  // Runs the calls `n`'s loop posted, as far as its store lets them.
  void RunCalls(WorldNode& n);

  TempDir dir_;
  const int nodes_;
  std::map<std::string, std::string> flags_;
  Baton baton_;
  int next_id_ = 0;
  std::map<int, int> incarnations_;
  std::vector<std::unique_ptr<WorldNode>> runs_;
  std::map<int, WorldNode*> current_;
  std::map<uint64_t, Round> rounds_;
  const Clock::MonoTime start_ = clock.Monotonic();
  std::multimap<Clock::MonoTime, std::function<void()>> script_;
};

}  // namespace sg::testing

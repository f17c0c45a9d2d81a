#include "tests/support/fake_group_world.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "agent/group/group_agent.h"
#include "agent/repo/group_store.h"
#include "agent/repo/store_layout.h"
#include "common/files.h"

namespace sg::testing {

using std::chrono::milliseconds;
constexpr milliseconds kTick(100);

// ---------------------------------------------------------------- trainer

class WorldTrainer final : public Trainer {
 public:
  WorldTrainer(FakeGroupWorld& world, WorldNode& node, const TrainerLaunch& launch)
      : world_(world), node_(node), plan_(world.trainer) {
    const GroupPlacement& g = *launch.group;
    round_ = g.round;
    rank_ = g.rank;
    if (!launch.resume.empty()) {
      std::ifstream in(launch.resume);
      int r = -1;
      in >> r >> step_ >> total_;
      poisoned_ = plan_.poisoned_resume_step == step_;
      if (r != rank_) {
        ADD_FAILURE() << "rank " << rank_ << " on " << node.instance << " was given rank " << r
                      << "'s checkpoint " << launch.resume;
        exit_ = ExitStatus{.code = 4, .signal = 0};
        return;
      }
    }
    FakeGroupWorld::Round& round = world_.rounds()[round_];
    round.nnodes = static_cast<int>(g.addresses.size());
    round.ranks[rank_] = this;
    node_.trainer = this;
  }
  ~WorldTrainer() override {
    auto& ranks = world_.rounds()[round_].ranks;
    if (auto it = ranks.find(rank_); it != ranks.end() && it->second == this) ranks.erase(it);
    if (node_.trainer == this) node_.trainer = nullptr;
  }

  bool running() const override { return !exit_.has_value(); }
  std::optional<ExitStatus> Poll() override { return exit_; }
  Status Signal(int signo) override {
    node_.signals.push_back(signo);
    if (exit_) return Status::Ok();
    if (signo == SIGUSR1) {
      asked_ = true;
    } else {
      exit_ = ExitStatus{.code = 0, .signal = signo};
    }
    return Status::Ok();
  }
  StatusOr<ExitStatus> Stop(int signo, milliseconds /*grace*/) override {
    node_.signals.push_back(signo);
    if (!exit_) exit_ = ExitStatus{.code = 0, .signal = signo};
    return *exit_;
  }
  void Kill() {
    if (!exit_) exit_ = ExitStatus{.code = 0, .signal = SIGKILL};
  }
  bool asked() const { return asked_; }
  // One step of the collective; `save`: a rank was asked for a checkpoint
  // (the ranks agree on the step to save at, as an all-reduce of the flag).
  void Step(bool save) {
    if (exit_) return;
    if (poisoned_) {  // fails at its first step, every time
      exit_ = ExitStatus{.code = 3, .signal = 0};
      return;
    }
    if (step_ >= plan_.steps) {  // resumed from the last step: nothing left to do
      Finish();
      return;
    }
    ++step_;
    total_ = (total_ * 31 + step_ * (rank_ + 1)) % 1000000007;
    if (plan_.fail_at && step_ == *plan_.fail_at && rank_ == plan_.fail_rank &&
        !(plan_.fail_once && world_.trainer_failed_once)) {
      world_.trainer_failed_once = true;
      exit_ = ExitStatus{.code = 3, .signal = 0};
      return;
    }
    const bool periodic = plan_.save_every > 0 && step_ % plan_.save_every == 0;
    const bool may_save = !plan_.last_save_step || step_ <= *plan_.last_save_step;
    const bool saves = may_save && (periodic || (plan_.save_every == 0 && save));
    if (saves) Save();
    asked_ = asked_ && !saves;
    if (step_ >= plan_.steps) {
      if (!saves && may_save) Save();
      Finish();
    }
  }

 private:
  void Save() {
    const std::string tmp = node_.ckpt + "/.tmp_" + std::to_string(step_);
    const std::string path = node_.ckpt + "/step_" + std::to_string(step_) + ".pt";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << rank_ << " " << step_ << " " << total_ << "\n";
    }
    // Its mtime is the world's time: the watcher settles files on that clock.
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        world_.clock.Now().time_since_epoch())
                        .count();
    const timespec times[2] = {{ns / 1'000'000'000, ns % 1'000'000'000},
                               {ns / 1'000'000'000, ns % 1'000'000'000}};
    EXPECT_EQ(::utimensat(AT_FDCWD, tmp.c_str(), times, 0), 0) << tmp;
    EXPECT_EQ(std::rename(tmp.c_str(), path.c_str()), 0) << path;
  }

  void Finish() {
    node_.final =
        std::to_string(rank_) + " " + std::to_string(step_) + " " + std::to_string(total_);
    exit_ = ExitStatus{.code = 0, .signal = 0};
  }

  FakeGroupWorld& world_;
  WorldNode& node_;
  const TrainerPlan plan_;
  uint64_t round_ = 0;
  int rank_ = 0;
  int64_t step_ = 0;
  int64_t total_ = 0;
  bool poisoned_ = false;  // resumed from TrainerPlan::poisoned_resume_step
  bool asked_ = false;
  std::optional<ExitStatus> exit_;
};

class WorldLauncher final : public TrainerLauncher {
 public:
  WorldLauncher(FakeGroupWorld& world, WorldNode& node) : world_(world), node_(node) {}
  StatusOr<std::unique_ptr<Trainer>> Start(const TrainerLaunch& launch) override {
    node_.launches.push_back(launch);
    if (!launch.group) return Status::InvalidArgument("a group's trainer needs its placement");
    return std::unique_ptr<Trainer>(new WorldTrainer(world_, node_, launch));
  }

 private:
  FakeGroupWorld& world_;
  WorldNode& node_;
};

// ---------------------------------------------------------------- world

FakeGroupWorld::FakeGroupWorld(int nodes, std::map<std::string, std::string> flags)
    : nodes_(nodes) {
  // Files' mtimes are the world's time, and the watcher compares them with
  // its clock. It starts a day in the past, so that they are never in the
  // real clock's future either (capture waits for the real clock to pass a
  // file's mtime: agent/detect/capture.cc). It starts on a whole second:
  // a notice's time has whole seconds (FakeMetadata::PostNotice), so a
  // start with the real clock's fraction of a second would move every
  // deadline by up to a second from one run to the next.
  clock.SetNow(std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now() -
                                                        std::chrono::hours(24)));
  flags_ = {{"job", "job"},
            {"store", "file://" + dir_.Join("unused-store")},
            {"preset", "pytorch"},
            {"checkpoint_signal", "SIGUSR1"},
            {"stop_signal", "SIGTERM"},
            {"settle_time", "300ms"},
            {"upload_interval", "1s"},
            {"stop_grace", "5s"},
            {"stop_timeout", "90s"},
            {"nodes", std::to_string(nodes)},
            {"group.heartbeat", "1s"},
            {"group.timeout", "6s"},
            {"imds.poll_interval", "200ms"},
            {"restart.max", "2"},
            {"restart.backoff", "200ms"},
            {"restart.max_backoff", "1s"},
            {"lease.heartbeat", "1s"},
            {"lease.timeout", "6s"}};
  for (auto& [k, v] : flags) flags_[k] = v;
}

FakeGroupWorld::~FakeGroupWorld() {
  // Every agent still running is stopped (SIGTERM), its store thawed, and
  // run until it exits, dead ones included (their calls all fail).
  for (auto& run : runs_) {
    if (run->done) continue;
    run->stop_requested = true;
    run->store->Thaw();
    run->dead = false;
  }
  // What they do on the way out is no test's verdict: the world's time
  // moves a second a turn, so that the deadlines they wait out (a round's
  // end, stop_timeout) pass in few turns.
  for (int i = 0; i < 1000 && !std::all_of(runs_.begin(), runs_.end(),
                                          [](const auto& r) { return r->done.load(); });
       ++i) {
    clock.Advance(std::chrono::seconds(1) - kTick);
    Tick();
  }
  for (auto& run : runs_) {
    if (!run->done) {
      std::fprintf(stderr, "the agent on %s did not exit: its thread cannot be ended\n",
                   run->instance.c_str());
      std::abort();
    }
    run->thread.join();
  }
}

WorldNode& FakeGroupWorld::Start(int slot, const std::map<std::string, std::string>& flags) {
  auto run = std::make_unique<WorldNode>();
  WorldNode& n = *run;
  n.id = next_id_++;
  n.slot = slot;
  n.instance = "i-" + std::to_string(slot) + "-" + std::to_string(++incarnations_[slot]);
  n.ckpt = dir_.Join(n.instance + "/ckpt");
  std::filesystem::create_directories(n.ckpt);
  ConfigSources sources;
  sources.flags = flags_;
  for (auto& [k, v] : flags) sources.flags[k] = v;
  sources.flags["checkpoint_dir"] = n.ckpt;
  sources.flags["group.address"] = "10.0.0." + std::to_string(slot + 1);
  // The world's launcher starts nothing; "command_arg" adds one argument.
  sources.command_args = {"/nonexistent/trainer"};
  if (auto it = sources.flags.find("command_arg"); it != sources.flags.end()) {
    sources.command_args.push_back(it->second);
    sources.flags.erase(it);
  }
  ConfigResult loaded = LoadConfig(sources, ConfigNeeds{true, true, true});
  EXPECT_TRUE(loaded.ok()) << (loaded.ok() ? "" : loaded.problems.front().message);
  n.config = loaded.config;
  n.imds = std::make_unique<FakeMetadata>(clock);
  n.store = std::make_unique<NodeStore>(store, clock, [this, &n] { baton_.Yield(n.id); });
  n.launcher = std::make_unique<WorldLauncher>(*this, n);
  n.thread = std::thread([this, &n] {
    baton_.Await(n.id);
    n.store->SetLoopThread(std::this_thread::get_id());
    AgentContext context{n.config, n.env, *n.store, clock, n.imds.get(), n.notifier, n.instance};
    context.ports.trainer = n.launcher.get();
    context.ports.autoscaling = &n.autoscaling;
    context.ports.idle = [this, &n](milliseconds) { baton_.Yield(n.id); };
    context.ports.stop_requested = [&n] { return std::exchange(n.stop_requested, false); };
    context.ports.inline_store_work = true;
    if (prices) {
      context.ports.prices = prices;
      context.identity = InstanceIdentity{n.instance, "us-east-1", "us-east-1a", "g5.xlarge", "spot"};
    }
    context.ports.loop_calls = [&n](std::function<void()> call) {
      n.calls.push_back(std::move(call));
    };
    n.result = RunGroupAgent(context);
    // What its loop posted and the world did not run is never run: it
    // uses the agent, which is gone (AgentPorts::loop_calls).
    n.done = true;
    baton_.Done();
  });
  current_[slot] = &n;
  runs_.push_back(std::move(run));
  return n;
}

void FakeGroupWorld::StartAll() {
  for (int s = 0; s < nodes_; ++s) Start(s);
}

void FakeGroupWorld::Kill(int slot) {
  WorldNode& n = node(slot);
  n.dead = true;
  n.store->Die();
  if (n.trainer) n.trainer->Kill();
}

void FakeGroupWorld::KillAtPutOf(int slot, const std::string& fragment) {
  node(slot).store->DieAtPutOf(fragment, [this, slot] { Kill(slot); });
}

std::optional<int> FakeGroupWorld::Coordinator() {
  auto body = store.Get(LeaseKey("job"));
  if (!body.ok()) return std::nullopt;
  const auto j = nlohmann::json::parse(*body, nullptr, false);
  if (!j.is_object() || j.value("released", false)) return std::nullopt;
  const std::string instance = j.value("instance", "");
  for (auto& [slot, n] : current_) {
    if (n->instance == instance && !n->done && !n->dead) return slot;
  }
  return std::nullopt;
}

void FakeGroupWorld::At(milliseconds offset, std::function<void()> step) {
  script_.emplace(start_ + offset, std::move(step));
}

milliseconds FakeGroupWorld::Elapsed() {
  return std::chrono::duration_cast<milliseconds>(clock.Monotonic() - start_);
}

void FakeGroupWorld::Tick() {
  for (auto& run : runs_) {
    if (run->done || run->dead) continue;
    baton_.Pass(run->id);
    if (!run->done) RunCalls(*run);
  }
  clock.Advance(kTick);
  StepTrainers();
  while (!script_.empty() && script_.begin()->first <= clock.Monotonic()) {
    auto step = std::move(script_.begin()->second);
    script_.erase(script_.begin());
    step();
  }
}

void FakeGroupWorld::RunCalls(WorldNode& n) {
  while (!n.calls.empty() && !n.dead && !n.store->frozen() && clock.Monotonic() >= n.calls_ready) {
    std::function<void()> call = std::move(n.calls.front());
    n.calls.pop_front();
    call();
    if (n.store->delay().count() > 0) {
      n.calls_ready = clock.Monotonic() + n.store->delay();
      return;
    }
  }
}

void FakeGroupWorld::StepTrainers() {
  const auto now = clock.Monotonic();
  for (auto& [number, round] : rounds_) {
    bool all = static_cast<int>(round.ranks.size()) == round.nnodes;
    for (auto& [rank, t] : round.ranks) all = all && t->running();
    if (!all) {
      round.next_step = now + trainer.step_time;  // a collective waits for every rank
      continue;
    }
    if (now < round.next_step) continue;
    round.next_step = now + trainer.step_time;
    bool asked = false;
    for (auto& [rank, t] : round.ranks) asked = asked || t->asked();
    for (auto& [rank, t] : round.ranks) t->Step(asked);
  }
}

bool FakeGroupWorld::RunUntil(const std::function<bool()>& done, milliseconds limit) {
  const auto until = clock.Monotonic() + limit;
  while (!done()) {
    if (clock.Monotonic() >= until) return false;
    Tick();
  }
  return true;
}

bool FakeGroupWorld::RunUntilExited(milliseconds limit, std::vector<int> slots) {
  if (slots.empty()) {
    for (auto& [slot, n] : current_) slots.push_back(slot);
  }
  return RunUntil(
      [&] {
        return std::all_of(slots.begin(), slots.end(), [&](int s) { return node(s).done.load(); });
      },
      limit);
}

std::vector<uint64_t> FakeGroupWorld::GroupSeqs() {
  std::vector<uint64_t> out;
  auto groups = GroupStore(store, "job").Groups();
  EXPECT_TRUE(groups.ok()) << groups.status().ToString();
  if (groups.ok()) {
    for (const GroupCommit& g : *groups) out.push_back(g.seq);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<int64_t> FakeGroupWorld::NewestGroupStep() {
  auto groups = GroupStore(store, "job").Groups();
  std::optional<int64_t> step;
  std::optional<uint64_t> seq;
  if (groups.ok()) {
    for (const GroupCommit& g : *groups) {
      if (!seq || g.seq > *seq) {
        seq = g.seq;
        step = g.step;
      }
    }
  }
  return step;
}

std::vector<std::string> FakeGroupWorld::EndReasons(uint64_t round) {
  std::vector<std::string> out;
  auto ends = GroupStore(store, "job").Ends(round);
  if (ends.ok()) {
    for (const RoundEnd& e : *ends) out.push_back(e.reason);
  }
  return out;
}

uint64_t FakeGroupWorld::NewestRound() {
  auto plans = GroupStore(store, "job").Plans();
  return plans.ok() ? plans->newest_round : 0;
}

}  // namespace sg::testing

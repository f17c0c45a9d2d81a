// `spotguard run` for a job of several nodes (`nodes` > 1; docs/multi-node.md,
// docs/design.md §14). One agent per node; the store is the only meeting
// point. Each agent keeps its member record fresh; the lease holder is the
// coordinator: it writes each round's plan when `nodes` members are alive,
// and commits a group snapshot once every rank's part of one step is stored.
// Every agent restores its rank's part, starts its trainer with the plan's
// placement, uploads its node's checkpoints as parts, and ends the round on
// a notice, a stale member or a crash. The decisions are
// agent/group/group_policy.h's and agent/repo/group_protocol.h's; the records'
// keys agent/repo/group_store.h's.
#pragma once

#include "agent/run/daemon.h"

namespace sg {

AgentResult RunGroupAgent(const AgentContext& context);

}  // namespace sg

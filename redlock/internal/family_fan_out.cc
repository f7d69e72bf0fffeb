// One command to every node, every reply gathered (family_fan_out.h).

#include "redlock/internal/family_fan_out.h"

#include <memory>
#include <mutex>
#include <utility>

#include "redlock/internal/node_calls.h"
#include "redlock/internal/votes.h"

namespace redlock::internal {

void FanOut(OpContext& ctx, const Command& command, absl::AnyInvocable<void(Replies)> done) {
  struct State {
    std::mutex mu;
    Replies replies;
    int left = 0;
    absl::AnyInvocable<void(Replies)> done;
  };
  const int n = ctx.nodes();
  auto state = std::make_shared<State>();
  state->replies.assign(static_cast<size_t>(n), absl::UnavailableError("no reply"));
  state->left = n;
  state->done = std::move(done);
  static const NodeCalls::Judge kAnyAnswer = [](const absl::StatusOr<Reply>&) {
    return Vote{Round::Vote::kYes, ""};
  };
  for (int i = 0; i < n; ++i) {
    ctx.calls().Send(i, command, kAnyAnswer, /*durable=*/false, OnNoScript::kResend,
                     [state, i](NodeCalls::Answer a) {
                       absl::AnyInvocable<void(Replies)> fire;
                       Replies replies;
                       {
                         std::lock_guard<std::mutex> lock(state->mu);
                         state->replies[static_cast<size_t>(i)] = std::move(a.reply);
                         if (--state->left > 0) return;
                         fire = std::move(state->done);
                         replies = std::move(state->replies);
                       }
                       if (fire) fire(std::move(replies));
                     });
  }
}

}  // namespace redlock::internal

#include "redlock/internal/family_api.h"

#include <memory>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"

namespace redlock::internal {

ClientImpl* ImplOf(Client* client) { return dynamic_cast<ClientImpl*>(client); }

absl::Status NotACreatedClient(absl::string_view what) {
  return absl::FailedPreconditionError(
      absl::StrCat(what, ": not a client made by redlock::Client::Create"));
}

void SendToAll(OpContext& ctx, const Command& command,
               absl::AnyInvocable<void(std::vector<absl::StatusOr<Reply>>)> done) {
  struct State {
    std::mutex mu;
    std::vector<absl::StatusOr<Reply>> replies;
    int left = 0;
    absl::AnyInvocable<void(std::vector<absl::StatusOr<Reply>>)> done;
  };
  Transport& t = ctx.transport();
  const int n = t.size();
  auto state = std::make_shared<State>();
  state->replies.assign(static_cast<size_t>(n), absl::UnavailableError("no reply"));
  state->left = n;
  state->done = std::move(done);
  for (int i = 0; i < n; ++i) {
    t.Send(i, command, [state, i](absl::StatusOr<Reply> r) {
      absl::AnyInvocable<void(std::vector<absl::StatusOr<Reply>>)> fire;
      std::vector<absl::StatusOr<Reply>> replies;
      {
        std::lock_guard<std::mutex> lock(state->mu);
        state->replies[static_cast<size_t>(i)] = std::move(r);
        if (--state->left > 0) return;
        fire = std::move(state->done);
        replies = std::move(state->replies);
      }
      if (fire) fire(std::move(replies));
    });
  }
}

absl::StatusOr<std::vector<absl::StatusOr<Reply>>> SendToAllAndWait(ClientImpl& impl,
                                                                    const Command& command) {
  using Result = absl::StatusOr<std::vector<absl::StatusOr<Reply>>>;
  return impl.Block<Result>([&](absl::AnyInvocable<void(Result)> done) {
    SendToAll(impl.context(), command,
              [done = std::move(done)](std::vector<absl::StatusOr<Reply>> r) mutable {
                done(std::move(r));
              });
  });
}

}  // namespace redlock::internal

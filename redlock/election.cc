#include "redlock/election.h"

#include <algorithm>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "redlock/internal/family_api.h"
#include "redlock/internal/lock_shape.h"
#include "redlock/internal/token.h"

namespace redlock {
namespace {

constexpr char kIdentitySeparator = '.';

// A leader's token carries its identity, so that any process reading the
// lock key knows who leads; the random part keeps it unguessable. The
// term is the fencing token, whatever Options::fencing says.
class LeaderShape final : public internal::AcquireShape {
 public:
  explicit LeaderShape(std::string identity_hex) : identity_hex_(std::move(identity_hex)) {}
  std::string Token() const override {
    std::string t = internal::NewToken();
    if (!identity_hex_.empty())
      absl::StrAppend(&t, std::string(1, kIdentitySeparator), identity_hex_);
    return t;
  }
  bool force_fencing() const override { return true; }
  // The term counts this resource's elections: its own counter, even when
  // the namespace shares one (Options::FencingCounters::kShared).
  bool own_counters() const override { return true; }

 private:
  const std::string identity_hex_;
};

}  // namespace

// ---- Leadership -------------------------------------------------------------------

Leadership::Leadership(Client* client, std::string resource, std::string identity, Lease lease,
                       std::unique_ptr<Renewal> renewal)
    : client_(client),
      resource_(std::move(resource)),
      identity_(std::move(identity)),
      lease_(std::move(lease)),
      renewal_(std::move(renewal)) {}

Leadership::~Leadership() { (void)Resign(); }

Lease Leadership::lease() const { return renewal_ != nullptr ? renewal_->lease() : lease_; }

bool Leadership::leading() const {
  return !resigned_ && renewal_ != nullptr && renewal_->active() &&
         renewal_->lease().TimeLeft() > absl::ZeroDuration();
}

bool Leadership::at_risk() const { return renewal_ != nullptr && renewal_->at_risk(); }

StopToken Leadership::lost() const { return renewal_ != nullptr ? renewal_->lost() : StopToken(); }

absl::Status Leadership::status() const {
  return renewal_ != nullptr ? renewal_->status() : absl::OkStatus();
}

absl::Status Leadership::Resign() {
  if (resigned_) return absl::OkStatus();
  resigned_ = true;
  Lease current = lease();
  if (renewal_ != nullptr) renewal_->Stop();
  return client_->Release(current);
}

// ---- Election ----------------------------------------------------------------------

Election::Election(Client* client, std::string resource)
    : client_(client), resource_(std::move(resource)) {}

std::string Election::IdentityOf(absl::string_view token) {
  size_t at = token.find(kIdentitySeparator);
  if (at == absl::string_view::npos) return "";
  absl::string_view hex = token.substr(at + 1);
  if (hex.size() % 2 != 0) return "";
  for (char c : hex) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return "";
  }
  return absl::HexStringToBytes(hex);
}

void Election::Lead(absl::string_view identity, std::optional<absl::Duration> wait,
                    const StopToken& stop, CampaignOptions options, LeadershipCallback done) {
  internal::ClientImpl* impl = internal::ImplOf(client_);
  if (impl == nullptr) {
    done(internal::NotACreatedClient("Election"));
    return;
  }
  if (identity.size() > kMaxIdentity) {
    done(absl::InvalidArgumentError(absl::StrCat("election \"", resource_, "\": identity of ",
                                                 identity.size(), " bytes (at most ", kMaxIdentity,
                                                 ")")));
    return;
  }
  Client::SetRequest call;
  call.resources = {resource_};
  call.ttl = options.ttl;
  call.wait = wait;
  call.max_attempts = 1;
  call.stop = stop;
  auto shape = std::make_shared<LeaderShape>(absl::BytesToHexString(identity));
  Client* client = client_;
  impl->StartSet(
      std::move(call), std::move(shape),
      [client, resource = resource_, identity = std::string(identity), options = std::move(options),
       done = std::move(done)](absl::StatusOr<std::vector<Lease>> r) mutable {
        if (!r.ok()) {
          done(r.status());
          return;
        }
        Lease lease = std::move((*r)[0]);
        RenewOptions renew = options.renew;
        if (renew.ttl == absl::ZeroDuration()) renew.ttl = options.ttl;
        std::function<void(const absl::Status&)> on_lost = options.on_lost;
        // Non-blocking: this may run on the client's own thread.
        absl::StatusOr<std::unique_ptr<Renewal>> renewal =
            client->AutoRenew(lease, renew, [on_lost](absl::Status why) {
              if (on_lost) on_lost(why);
            });
        if (!renewal.ok()) {
          client->ReleaseAsync(lease, [](absl::Status) {});
          done(renewal.status());
          return;
        }
        done(std::unique_ptr<Leadership>(new Leadership(client, std::move(resource),
                                                        std::move(identity), std::move(lease),
                                                        *std::move(renewal))));
      });
}

absl::StatusOr<std::unique_ptr<Leadership>> Election::LeadBlocking(
    absl::string_view identity, std::optional<absl::Duration> wait, const StopToken& stop,
    CampaignOptions options) {
  internal::ClientImpl* impl = internal::ImplOf(client_);
  if (impl == nullptr) return internal::NotACreatedClient("Election");
  using Result = absl::StatusOr<std::unique_ptr<Leadership>>;
  return impl->Block<Result>([&](LeadershipCallback done) {
    Lead(identity, wait, stop, std::move(options), std::move(done));
  });
}

absl::StatusOr<std::unique_ptr<Leadership>> Election::TryCampaign(absl::string_view identity,
                                                                  CampaignOptions options) {
  return LeadBlocking(identity, std::nullopt, StopToken(), std::move(options));
}

absl::StatusOr<std::unique_ptr<Leadership>> Election::Campaign(absl::string_view identity,
                                                               absl::Duration wait,
                                                               const StopToken& stop,
                                                               CampaignOptions options) {
  return LeadBlocking(identity, wait, stop, std::move(options));
}

void Election::CampaignAsync(absl::string_view identity, absl::Duration wait, const StopToken& stop,
                             CampaignOptions options, LeadershipCallback done) {
  internal::ClientImpl* impl = internal::ImplOf(client_);
  if (impl == nullptr) {
    done(internal::NotACreatedClient("Election"));
    return;
  }
  Lead(identity, wait, stop, std::move(options), impl->ToUser(std::move(done)));
}

absl::StatusOr<std::optional<LeaderInfo>> Election::Observe() {
  internal::ClientImpl* impl = internal::ImplOf(client_);
  if (impl == nullptr) return internal::NotACreatedClient("Election");
  absl::StatusOr<std::vector<NodeView>> views = client_->Inspect(resource_);
  if (!views.ok()) return views.status();
  const int quorum = impl->context().quorum();
  int answered = 0;
  std::map<std::string, std::vector<const NodeView*>> by_token;
  for (const NodeView& v : *views) {
    if (!v.status.ok()) continue;
    ++answered;
    if (v.held) by_token[v.token].push_back(&v);
  }
  if (answered < quorum) {
    return absl::UnavailableError(absl::StrCat("observe election \"", resource_, "\": ", answered,
                                               " of ", views->size(), " nodes answered (quorum ",
                                               quorum, ")"));
  }
  for (const auto& [token, holders] : by_token) {
    if (static_cast<int>(holders.size()) < quorum) continue;
    LeaderInfo info;
    info.token = token;
    info.identity = IdentityOf(token);
    // The nodes of the leader's commit all carry its term; a node that
    // granted late may carry another value.
    std::map<uint64_t, int> terms;
    std::vector<absl::Duration> left;
    for (const NodeView* v : holders) {
      ++terms[v->fence_counter];
      left.push_back(v->ttl_left);
    }
    for (const auto& [term, count] : terms) {
      if (count >= quorum) info.term = term;
    }
    std::sort(left.begin(), left.end(), std::greater<absl::Duration>());
    info.ttl_left = left[static_cast<size_t>(quorum - 1)];
    return std::optional<LeaderInfo>(std::move(info));
  }
  return std::optional<LeaderInfo>();
}

}  // namespace redlock

#include "redlock/election.h"

#include <algorithm>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace redlock {
namespace {

constexpr char kIdentitySeparator = '.';

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
  return !resigned_.load(std::memory_order_acquire) && renewal_ != nullptr && renewal_->active() &&
         renewal_->lease().TimeLeft() > absl::ZeroDuration();
}

bool Leadership::at_risk() const { return renewal_ != nullptr && renewal_->at_risk(); }

StopToken Leadership::lost() const { return renewal_ != nullptr ? renewal_->lost() : StopToken(); }

absl::Status Leadership::status() const {
  return renewal_ != nullptr ? renewal_->status() : absl::OkStatus();
}

absl::Status Leadership::Resign() {
  // Once, whichever thread comes first.
  if (resigned_.exchange(true, std::memory_order_acq_rel)) return absl::OkStatus();
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

Client::FamilyRequest Election::Request(absl::string_view identity,
                                        std::optional<absl::Duration> wait, const StopToken& stop,
                                        const CampaignOptions& options) const {
  Client::FamilyRequest r = Client::FamilyRequest::Of(Client::FamilyRequest::Kind::kLeader,
                                                      resource_, options.ttl, wait, stop);
  r.identity = std::string(identity);
  return r;
}

absl::StatusOr<std::unique_ptr<Leadership>> Election::Adopt(
    Client* client, std::string resource, std::string identity, const CampaignOptions& options,
    absl::StatusOr<Client::FamilyGrant> granted) {
  if (!granted.ok()) return granted.status();
  Lease lease = std::move(granted->lease);
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
    return renewal.status();
  }
  return std::unique_ptr<Leadership>(new Leadership(
      client, std::move(resource), std::move(identity), std::move(lease), *std::move(renewal)));
}

absl::StatusOr<std::unique_ptr<Leadership>> Election::LeadBlocking(
    absl::string_view identity, std::optional<absl::Duration> wait, const StopToken& stop,
    CampaignOptions options) {
  absl::StatusOr<Client::FamilyGrant> granted =
      client_->AcquireFamily(Request(identity, wait, stop, options));
  return Adopt(client_, resource_, std::string(identity), options, std::move(granted));
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
  Client::FamilyRequest request = Request(identity, wait, stop, options);
  client_->AcquireFamilyAsync(
      std::move(request), [client = client_, resource = resource_, identity = std::string(identity),
                           options = std::move(options), done = std::move(done)](
                              absl::StatusOr<Client::FamilyGrant> granted) mutable {
        done(Adopt(client, std::move(resource), std::move(identity), options, std::move(granted)));
      });
}

absl::StatusOr<std::optional<LeaderInfo>> Election::Observe() {
  absl::StatusOr<std::vector<FamilyNodeView>> views =
      client_->InspectFamily(Request("", std::nullopt, StopToken(), CampaignOptions()));
  if (!views.ok()) return views.status();
  const int quorum = EffectiveQuorum(client_->options());
  int answered = 0;
  std::map<std::string, std::vector<const FamilyNodeView*>> by_token;
  for (const FamilyNodeView& v : *views) {
    if (!v.status.ok()) continue;
    ++answered;
    if (!v.holder.empty()) by_token[v.holder].push_back(&v);
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
    // The nodes of the leader's commit all carry its term (the election's
    // own counter); a node that granted late may carry another value.
    std::map<uint64_t, int> terms;
    std::vector<absl::Duration> left;
    for (const FamilyNodeView* v : holders) {
      ++terms[v->fence_counter];
      left.push_back(v->holder_ttl_left);
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

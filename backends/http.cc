#include "backends/http.h"

#ifdef REDLOCK_HAVE_LIBCURL
#include <curl/curl.h>
#endif

#include <algorithm>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"

namespace redlock::backends {

#ifdef REDLOCK_HAVE_LIBCURL
namespace {

// curl_global_init is not thread-safe: once per process, before any handle.
bool GlobalInit() {
  static std::once_flag once;
  static bool ok = false;
  std::call_once(once, [] { ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; });
  return ok;
}

size_t AppendBody(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

}  // namespace

HttpClient::HttpClient(std::vector<std::string> endpoints) : endpoints_(std::move(endpoints)) {
  if (endpoints_.empty()) endpoints_.push_back("127.0.0.1:2379");
}

HttpClient::~HttpClient() { Close(); }

void HttpClient::Close() {
  // The handle owns the kept-alive connection: dropping it closes that.
  if (curl_ != nullptr) curl_easy_cleanup(curl_);
  curl_ = nullptr;
}

void HttpClient::Fail() {
  Close();
  index_ = (index_ + 1) % endpoints_.size();
}

absl::StatusOr<HttpReply> HttpClient::Post(absl::string_view path, absl::string_view body,
                                           absl::Duration timeout) {
  const std::string& ep = endpoints_[index_];
  if (!GlobalInit()) return absl::InternalError("libcurl: curl_global_init failed");
  if (curl_ == nullptr) curl_ = curl_easy_init();
  if (curl_ == nullptr) return absl::InternalError("libcurl: curl_easy_init failed");
  HttpReply reply;
  char error[CURL_ERROR_SIZE] = {0};
  const std::string url = absl::StrCat("http://", ep, path);
  const long timeout_ms =  // NOLINT(runtime/int): curl's type
      static_cast<long>(std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout)));
  // "Expect:" off: a large body goes at once, not after a 100 Continue.
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  headers = curl_slist_append(headers, "Expect:");
  curl_easy_reset(curl_);  // keeps the connection, forgets the last request's options
  curl_easy_setopt(curl_, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl_, CURLOPT_PROTOCOLS_STR, "http");
  curl_easy_setopt(curl_, CURLOPT_PROXY, "");  // loopback: never through a proxy
  curl_easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl_, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl_, CURLOPT_POST, 1L);
  curl_easy_setopt(curl_, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(curl_, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(curl_, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, &AppendBody);
  curl_easy_setopt(curl_, CURLOPT_WRITEDATA, &reply.body);
  curl_easy_setopt(curl_, CURLOPT_ERRORBUFFER, error);
  const CURLcode code = curl_easy_perform(curl_);
  curl_slist_free_all(headers);
  if (code != CURLE_OK) {
    const std::string why = error[0] != '\0' ? error : curl_easy_strerror(code);
    Fail();
    if (code == CURLE_OPERATION_TIMEDOUT) {
      return absl::DeadlineExceededError(
          absl::StrCat(ep, ": no reply within ", absl::FormatDuration(timeout), " (", why, ")"));
    }
    return absl::UnavailableError(absl::StrCat(ep, ": ", why));
  }
  long status = 0;  // NOLINT(runtime/int): curl's type
  curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &status);
  reply.status = static_cast<int>(status);
  return reply;
}

#else  // no libcurl in this build: etcd is skipped (lock_service.h ClientAvailable)

HttpClient::HttpClient(std::vector<std::string> endpoints) : endpoints_(std::move(endpoints)) {
  if (endpoints_.empty()) endpoints_.push_back("127.0.0.1:2379");
}
HttpClient::~HttpClient() = default;
void HttpClient::Close() {}
void HttpClient::Fail() {}
absl::StatusOr<HttpReply> HttpClient::Post(absl::string_view, absl::string_view, absl::Duration) {
  return absl::FailedPreconditionError(
      "this build has no libcurl: install libcurl4-openssl-dev (then rebuild)");
}

#endif  // REDLOCK_HAVE_LIBCURL

}  // namespace redlock::backends

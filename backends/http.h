// backends/http.h: the blocking HTTP client that etcd's JSON gateway needs,
// on libcurl: POST with a JSON body over a kept-alive connection, a
// deadline per request, no proxy, no redirects, plain HTTP only. Loopback
// only by construction (the endpoints come from the harness).
//
//   HttpClient http({"127.0.0.1:2379", "127.0.0.1:2479"});
//   absl::StatusOr<HttpReply> r = http.Post("/v3/kv/range", R"({"key":"YQ=="})", absl::Seconds(2));
//
// On a connection failure or a timeout the connection is closed and the
// next request goes to the next endpoint (a request is never retried: it
// may have been applied).
//
// Thread-safety: not thread-safe; one per session.

#ifndef REDLOCK_BACKENDS_HTTP_H_
#define REDLOCK_BACKENDS_HTTP_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace redlock::backends {

struct HttpReply {
  int status = 0;
  std::string body;
};

class HttpClient {
 public:
  explicit HttpClient(std::vector<std::string> endpoints);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // kUnavailable on connect/I-O errors, kDeadlineExceeded on a timeout
  // (both close the connection and move to the next endpoint).
  absl::StatusOr<HttpReply> Post(absl::string_view path, absl::string_view body,
                                 absl::Duration timeout);
  // The endpoint the next request goes to.
  const std::string& current() const { return endpoints_[index_]; }
  void Close();

 private:
  void Fail();

  std::vector<std::string> endpoints_;
  size_t index_ = 0;
  // libcurl's easy handle (CURL*); its connection cache is the kept-alive
  // connection.
  void* curl_ = nullptr;
};

}  // namespace redlock::backends

#endif  // REDLOCK_BACKENDS_HTTP_H_

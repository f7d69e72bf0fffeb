// The client's TLS context (trust roots, client certificate, verification:
// one SSL_CTX per client) and each node's session cache: what is loaded
// once and kept; the connections' streams are tls_stream.cc's.

#include <dirent.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/status_macros.h"
#include "redlock/internal/tls_stream.h"

namespace redlock::internal {

std::string TlsReasonText(unsigned long err) {
  const char* reason = ERR_reason_error_string(err);
  if (reason != nullptr) return reason;
  char buf[256];
  ERR_error_string_n(err, buf, sizeof(buf));
  return buf;
}

int TlsSessionCacheIndex() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

namespace {

// OpenSSL hands over every new session (TLS 1.3: tickets after the
// handshake); the node's cache keeps the latest.
int OnNewSession(SSL* ssl, SSL_SESSION* session) {
  auto* cache = static_cast<TlsSessionCache*>(SSL_get_ex_data(ssl, TlsSessionCacheIndex()));
  if (cache == nullptr) return 0;  // not kept: OpenSSL frees it
  cache->Keep(session);
  return 1;
}

// An OpenSSL error from loading `what` ("the CA file /x/ca.pem").
absl::Status LoadError(absl::string_view what) {
  unsigned long err = ERR_peek_last_error();
  std::string why = err != 0 ? TlsReasonText(err) : "unknown error";
  ERR_clear_error();
  return absl::InvalidArgumentError(
      absl::StrCat("invalid TLS options: cannot load ", what, ": ", why));
}

// Checks that `path` names a readable file (or directory), so that the
// error says so rather than what OpenSSL makes of a missing file.
absl::Status CheckReadable(absl::string_view what, const std::string& path, bool directory) {
  if (directory) {
    DIR* d = opendir(path.c_str());
    if (d == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("invalid TLS options: cannot read ", what, " ",
                                                     path, ": ", ErrnoText(errno)));
    }
    closedir(d);
    return absl::OkStatus();
  }
  FILE* f = fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid TLS options: cannot read ", what, " ", path, ": ", ErrnoText(errno)));
  }
  fclose(f);
  return absl::OkStatus();
}

}  // namespace

// ---- TlsContext ------------------------------------------------------------------------------

absl::StatusOr<std::shared_ptr<TlsContext>> TlsContext::Create(const TlsOptions& options) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return absl::InternalError("TLS: SSL_CTX_new failed");
  // Owned by the TlsContext from here on, also on the error paths.
  std::shared_ptr<TlsContext> context(new TlsContext(ctx, options));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // Writes may take part of a buffer, and the engine retries a blocked write
  // from a buffer that may have moved.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // One recv(2) per batch of replies, not two per record (header, body).
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_verify(ctx, options.verify_peer ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  // Sessions are kept per node (TlsSessionCache), not in the context.
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(ctx, OnNewSession);

  if (!options.ca_file.empty()) {
    REDLOCK_RETURN_IF_ERROR(CheckReadable("the CA file", options.ca_file, false));
  }
  if (!options.ca_dir.empty()) {
    REDLOCK_RETURN_IF_ERROR(CheckReadable("the CA directory", options.ca_dir, true));
  }
  if (!options.ca_file.empty() || !options.ca_dir.empty()) {
    if (SSL_CTX_load_verify_locations(
            ctx, options.ca_file.empty() ? nullptr : options.ca_file.c_str(),
            options.ca_dir.empty() ? nullptr : options.ca_dir.c_str()) != 1) {
      return LoadError(options.ca_file.empty() ? "the CA directory " + options.ca_dir
                                               : "the CA file " + options.ca_file);
    }
  } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
    return LoadError("the system's trusted CAs");
  }
  if (!options.cert_file.empty()) {
    REDLOCK_RETURN_IF_ERROR(CheckReadable("the client certificate", options.cert_file, false));
    REDLOCK_RETURN_IF_ERROR(CheckReadable("the client key", options.key_file, false));
    if (SSL_CTX_use_certificate_chain_file(ctx, options.cert_file.c_str()) != 1) {
      return LoadError("the client certificate " + options.cert_file);
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, options.key_file.c_str(), SSL_FILETYPE_PEM) != 1 &&
        ERR_GET_REASON(ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH) {
      return LoadError("the client key " + options.key_file);
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
      ERR_clear_error();
      return absl::InvalidArgumentError(
          absl::StrCat("invalid TLS options: the client key ", options.key_file,
                       " does not belong to the certificate ", options.cert_file));
    }
  }
  return context;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

// ---- TlsSessionCache -------------------------------------------------------------------------

TlsSessionCache::~TlsSessionCache() { SSL_SESSION_free(session_); }

void TlsSessionCache::Offer(SSL* ssl) {
  std::lock_guard<std::mutex> lock(mu_);
  if (session_ != nullptr) SSL_set_session(ssl, session_);
}

void TlsSessionCache::Keep(SSL_SESSION* session) {
  std::lock_guard<std::mutex> lock(mu_);
  SSL_SESSION_free(session_);
  session_ = session;
}

}  // namespace redlock::internal

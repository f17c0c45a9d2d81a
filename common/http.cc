#include "common/http.h"

#include <curl/curl.h>

#include <algorithm>
#include <optional>

#include "common/log.h"
#include "common/spare_buffer.h"
#include "common/strings.h"

namespace sg {
namespace {

void GlobalInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// libcurl's receive buffer for a streamed body (CURLOPT_BUFFERSIZE; 16 KiB by
// default). The sink decodes zstd blocks (up to 128 KiB) straight from the
// pieces it is handed, and copies only a block that straddles two pieces:
// larger pieces, fewer copies (docs/design.md §7).
constexpr long kStreamBuffer = 1L << 20;
// libcurl's send buffer for a large body (CURLOPT_UPLOAD_BUFFERSIZE; 64 KiB
// by default).
constexpr long kSendBuffer = 512L << 10;

// One transfer's answer and what is known of its timing.
struct Transfer {
  CURL* curl = nullptr;
  const BodySink* sink = nullptr;  // streams a 2xx body, when set
  int streaming = -1;              // -1: not known until the body starts
  uint64_t streamed = 0;           // bytes handed to the sink
  Status sink_status;              // the sink's error, which ended the transfer
  HttpResponse response;
  bool answered = false;  // a byte of the answer has come
  std::chrono::milliseconds answer_timeout{0};
  // When the request's body was all sent; unset until then.
  std::optional<std::chrono::steady_clock::time_point> sent;
  bool answer_timed_out = false;
};

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  t->answered = true;
  if (t->sink != nullptr && t->streaming < 0) {
    long status = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
    t->streaming = status >= 200 && status < 300 ? 1 : 0;
  }
  if (t->streaming == 1) {
    t->sink_status = (*t->sink)(t->streamed, std::string_view(data, size * n));
    if (!t->sink_status.ok()) return 0;  // ends the transfer: CURLE_WRITE_ERROR
    t->streamed += size * n;
    return size * n;
  }
  std::string& body = t->response.body;
  if (body.empty()) {
    // The whole body at once, at its announced size (in the thread's spare
    // when it fits): no regrowing (a copy of everything received so far
    // each time) and no capacity beyond it. Up to 64 MiB (a restore's range
    // is at most 16 MiB): a larger or false announcement grows the buffer
    // as the bytes come.
    const std::string length = t->response.Header("content-length");
    uint64_t announced = 0;
    if (!length.empty() && length.size() <= 12 &&
        length.find_first_not_of("0123456789") == std::string::npos) {
      announced = std::stoull(length);
    }
    if (announced > body.capacity()) body = TakeSpareBuffer(announced);
  }
  body.append(data, size * n);
  return size * n;
}

// The answer timeout: counted from the moment the body was all sent, so that
// neither a long upload nor a long download is cut short.
// And a streamed body's sink is asked, with no bytes, whether the transfer
// may go on (BodySink): curl calls this about once a second while nothing
// flows, so a sink's error ends a transfer that stalls too.
int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t ultotal, curl_off_t ulnow) {
  auto* t = static_cast<Transfer*>(user);
  if (t->sink != nullptr && t->streaming != 0) {
    // An error the sink already gave (from a piece) stands: it is what ends
    // the transfer, and asking again must not replace it with a yes.
    if (!t->sink_status.ok()) return 1;
    t->sink_status = (*t->sink)(t->streamed, std::string_view());
    if (!t->sink_status.ok()) return 1;  // CURLE_ABORTED_BY_CALLBACK
  }
  if (t->answered || t->answer_timeout.count() <= 0) return 0;
  const auto now = std::chrono::steady_clock::now();
  if (!t->sent) {
    if (ulnow < ultotal) return 0;
    t->sent = now;
  }
  if (now - *t->sent < t->answer_timeout) return 0;
  t->answer_timed_out = true;
  return 1;  // aborts the transfer: CURLE_ABORTED_BY_CALLBACK
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  t->answered = true;
  HttpResponse* response = &t->response;
  std::string_view line(data, size * n);
  if (line.starts_with("HTTP/")) {
    response->headers.clear();  // a new response (after 100-continue or a redirect)
  } else if (size_t colon = line.find(':'); colon != std::string_view::npos) {
    response->headers.emplace_back(ToLower(Trim(line.substr(0, colon))),
                                   std::string(Trim(line.substr(colon + 1))));
  }
  return size * n;
}

// The server's certificate (or the CA file) failed verification.
bool IsCertificateError(CURLcode rc) {
  return rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE ||
         rc == CURLE_SSL_CERTPROBLEM || rc == CURLE_SSL_ISSUER_ERROR ||
         rc == CURLE_SSL_PINNEDPUBKEYNOTMATCH;
}

// The request's headers for libcurl. No "Expect: 100-continue" round trip
// before a body, and no form Content-Type that libcurl would add to a body
// the caller did not type.
curl_slist* CurlHeaderList(const HttpRequest& request) {
  curl_slist* headers = nullptr;
  for (const auto& [k, v] : request.headers) {
    headers = curl_slist_append(headers, (k + ": " + v).c_str());
  }
  headers = curl_slist_append(headers, "Expect:");
  bool has_content_type = false;
  for (const auto& [k, v] : request.headers) has_content_type |= ToLower(k) == "content-type";
  if (!has_content_type) headers = curl_slist_append(headers, "Content-Type:");
  return headers;
}

// Where `request` goes and how long it may take: URL, TLS and timeouts.
void SetCurlConnectOptions(CURL* curl, const HttpRequest& request, const std::string& ca_bundle) {
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  // Send the path exactly as given: S3 keys may hold "./" or "../" segments,
  // and the signature covers the path as written.
  curl_easy_setopt(curl, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!ca_bundle.empty()) {
    curl_easy_setopt(curl, CURLOPT_CAINFO, ca_bundle.c_str());
    curl_easy_setopt(curl, CURLOPT_CAPATH, "/etc/ssl/certs");
  }
  if (request.no_proxy) curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
  if (request.stall_timeout.count() > 0) {
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME,
                     static_cast<long>(request.stall_timeout.count()));
  }
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(request.connect_timeout.count()));
}

// The headers, the callbacks into `transfer`, the method and the body.
void SetCurlRequestOptions(CURL* curl, const HttpRequest& request, curl_slist* headers,
                           Transfer& transfer) {
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
  if (request.answer_timeout.count() > 0 || request.body_sink) {
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, OnProgress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &transfer);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  }
  if (request.method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (request.method != "GET" || !request.body.empty()) {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(request.body.size()));
    // A large body (a part) goes to the socket in pieces of kSendBuffer, not
    // 64 KiB: a sixteenth of the send calls.
    if (request.body.size() >= kSendBuffer) {
      curl_easy_setopt(curl, CURLOPT_UPLOAD_BUFFERSIZE, kSendBuffer);
    }
  }
}

// What Send returns for a transfer that ended with `rc` (not CURLE_OK) of
// its own, not by a sink's error.
Status CurlFailureStatus(CURLcode rc, const HttpRequest& request, const Transfer& transfer) {
  // Only the method and the host part of the URL go into the message: a
  // presigned query string may carry credentials.
  std::string where = request.url.substr(0, request.url.find('?'));
  if (IsCertificateError(rc)) {
    // Retrying cannot make an untrusted certificate trusted: fail at once.
    return Status::PermissionDenied(request.method + " " + where + ": " + curl_easy_strerror(rc) +
                                    " (TLS verification is always on; AWS_CA_BUNDLE names "
                                    "extra CAs to trust)");
  }
  const std::string what =
      transfer.answer_timed_out
          ? Format("no answer within {:.0f} s",
                   std::chrono::duration<double>(request.answer_timeout).count())
          : curl_easy_strerror(rc);
  Status failure = Status::Unavailable(request.method + " " + where + ": " + what);
  return transfer.answered ? failure : failure.WithReason(kNoAnswerReason);
}

}  // namespace

std::string HttpResponse::Header(std::string_view name) const {
  const std::string lowered = ToLower(name);
  for (const auto& [k, v] : headers) {
    if (k == lowered) return v;
  }
  return "";
}

CurlTransport::CurlTransport(Options options) : options_(std::move(options)) { GlobalInitOnce(); }

CurlTransport::~CurlTransport() {
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
}

void* CurlTransport::Borrow() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void CurlTransport::Return(void* handle) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(handle);
}

StatusOr<HttpResponse> CurlTransport::Send(const HttpRequest& request) {
  CURL* curl = static_cast<CURL*>(Borrow());
  if (curl == nullptr) return Status::IOError("curl_easy_init failed");
  curl_easy_reset(curl);

  Transfer transfer;
  transfer.curl = curl;
  transfer.answer_timeout = request.answer_timeout;
  if (request.body_sink) {
    transfer.sink = &request.body_sink;
    curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, kStreamBuffer);
  }
  HttpResponse& response = transfer.response;
  curl_slist* headers = CurlHeaderList(request);
  SetCurlConnectOptions(curl, request, options_.ca_bundle);
  SetCurlRequestOptions(curl, request, headers, transfer);

  const CURLcode rc = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  if ((rc == CURLE_WRITE_ERROR || rc == CURLE_ABORTED_BY_CALLBACK) &&
      !transfer.sink_status.ok()) {
    Return(curl);
    return transfer.sink_status;  // the sink's own error, not the network's
  }
  if (rc != CURLE_OK) {
    Return(curl);
    return CurlFailureStatus(rc, request, transfer);
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  Return(curl);
  return std::move(response);
}

}  // namespace sg

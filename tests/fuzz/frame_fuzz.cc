// Fuzz target: the server's framing of client requests
// (streams/src/server/frame.h), fed bytes the way a connection receives them:
// frames are cut from the buffer one after another, each body parsed as a
// Request and checked as Connection::Handle checks it before touching any
// server state, until the framing breaks, the peer is refused or the bytes
// run out.
//
// Input: byte 0 configures the connection, the rest is what the peer sent.
//   bit 0      the server has an auth token ("s3cret")
//   bit 1      the connection has shown it already
//   bits 2..3  max_frame_bytes: 16 MiB (the default), 64, 1500, 3
//   bits 4..5  pre_auth_max_frame_bytes: 64 KiB (the default), 0, 16, 2000
//
// Checks: no crash or sanitizer report; ParseFrame never claims bytes the
// buffer does not have and keeps to its limits; a prefix of the buffer gives
// either kNeedMore or the same answer as the whole (the connection parses as
// bytes arrive); a parsed request framed again (FrameMessage) parses back to
// the same request; TokenInPrefix finds the token of a request serialized
// whole; ConstantTimeEquals agrees with ==.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "server/frame.h"

namespace {

namespace si = tributary::server_internal;

constexpr char kToken[] = "s3cret";
constexpr uint64_t kMaxFrame[] = {16u << 20, 64, 1500, 3};
constexpr uint64_t kPreAuthMax[] = {64u << 10, 0, 16, 2000};

bool Same(const si::FrameParse& a, const si::FrameParse& b) {
  return a.kind == b.kind && a.header_bytes == b.header_bytes && a.body_bytes == b.body_bytes &&
         a.token_shown == b.token_shown && a.error == b.error;
}

void CheckPrefixes(std::string_view buf, const si::FrameLimits& limits, const si::FrameParse& whole) {
  // Every prefix up to the end of the frame header and token prefix, then a
  // few lengths near the end of the frame.
  const size_t end = whole.kind == si::FrameParse::kFrame ? whole.header_bytes + whole.body_bytes : buf.size();
  for (size_t k = 0; k < end; ++k) {
    if (k > si::kMaxFrameHeaderBytes + si::kTokenPrefixBytes + 1 && k + 3 < end) {
      k = end - 3;  // skip the middle of a long body
    }
    const si::FrameParse p = si::ParseFrame(buf.substr(0, k), limits);
    FUZZ_CHECK(p.kind == si::FrameParse::kNeedMore || Same(p, whole),
               "a prefix of " + std::to_string(k) + " bytes decides differently from the whole buffer");
    if (p.kind == si::FrameParse::kNeedMore && p.token_shown) {
      FUZZ_CHECK(whole.token_shown, "the token seen in a prefix but not in the whole buffer");
    }
  }
}

void CheckRoundTrip(const tributary::v1::Request& req) {
  const std::string framed = si::FrameMessage(req);
  si::FrameLimits open;
  open.max_frame_bytes = uint64_t{1} << 32;
  const si::FrameParse f = si::ParseFrame(framed, open);
  FUZZ_CHECK(f.kind == si::FrameParse::kFrame && f.header_bytes + f.body_bytes == framed.size(),
             "FrameMessage's output is not one frame");
  tributary::v1::Request back;
  FUZZ_CHECK(si::ParseRequest(std::string_view(framed).substr(f.header_bytes), &back),
             "FrameMessage's body does not parse");
  FUZZ_CHECK(back.SerializeAsString() == req.SerializeAsString(), "a request changed by framing");
  if (!req.auth_token().empty()) {
    // Serialized in field order: request_id, then the token first.
    const std::string body = framed.substr(f.header_bytes);
    std::string token;
    FUZZ_CHECK(si::TokenInPrefix(body.data(), body.size(), &token) && token == req.auth_token(),
               "TokenInPrefix misses the token of a whole request");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tributary::fuzz::QuietProtobuf();
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  const std::string_view token = (mode & 1) ? std::string_view(kToken) : std::string_view();
  bool authenticated = token.empty() || (mode & 2) != 0;
  si::FrameLimits limits;
  limits.max_frame_bytes = kMaxFrame[(mode >> 2) & 3];
  limits.pre_auth_max_frame_bytes = kPreAuthMax[(mode >> 4) & 3];
  limits.auth_token = token;
  std::string_view buf(reinterpret_cast<const char*>(data + 1), size - 1);

  for (;;) {
    limits.check_token = !authenticated;
    const si::FrameParse f = si::ParseFrame(buf, limits);
    FUZZ_NOTE("frame: kind " + std::to_string(f.kind) + ", " + std::to_string(f.header_bytes) + " + " +
              std::to_string(f.body_bytes) + " bytes" + (f.error.empty() ? "" : ": " + f.error));
    CheckPrefixes(buf, limits, f);
    if (f.token_shown) {
      FUZZ_CHECK(limits.check_token, "a token shown on an authenticated connection");
      authenticated = true;
    }
    switch (f.kind) {
      case si::FrameParse::kNeedMore:
        FUZZ_CHECK(f.header_bytes == 0 || f.header_bytes + f.body_bytes > buf.size(), "kNeedMore with the frame");
        return 0;
      case si::FrameParse::kBad:
        FUZZ_CHECK(!f.error.empty(), "kBad without a reason");
        return 0;  // the connection answers and closes
      case si::FrameParse::kUnauthenticated:
        FUZZ_CHECK(limits.check_token && !token.empty(), "a stranger refused where no token is checked");
        return 0;  // refused and closed
      case si::FrameParse::kFrame:
        break;
    }
    FUZZ_CHECK(f.header_bytes >= 1 && f.header_bytes <= si::kMaxFrameHeaderBytes, "header length");
    FUZZ_CHECK(f.header_bytes + f.body_bytes <= buf.size(), "a frame longer than the buffer");
    FUZZ_CHECK(f.body_bytes <= limits.max_frame_bytes, "a frame over max_frame_bytes");
    const std::string_view body = buf.substr(f.header_bytes, f.body_bytes);
    buf.remove_prefix(f.header_bytes + f.body_bytes);
    tributary::v1::Request req;
    if (!si::ParseRequest(body, &req)) return 0;  // BadFrame: closed
    CheckRoundTrip(req);
    FUZZ_CHECK(si::ConstantTimeEquals(req.auth_token(), token) == (req.auth_token() == token),
               "ConstantTimeEquals differs from ==");
    const si::RequestCheck check = si::CheckRequest(req, token);
    if (check == si::RequestCheck::kUnauthenticated) {
      FUZZ_CHECK(!token.empty() && req.auth_token() != token, "refused with the right token");
      return 0;  // refused and closed
    }
    if (!token.empty()) authenticated = true;
    if (check == si::RequestCheck::kNoKind) {
      FUZZ_CHECK(req.kind_case() == tributary::v1::Request::KIND_NOT_SET, "kNoKind for a request with a kind");
      continue;
    }
    if (req.has_learn()) {
      FUZZ_CHECK(si::LearnRequestError(req.learn()).empty() == (req.learn().documents_size() > 0), "LearnRequestError");
    }
  }
}

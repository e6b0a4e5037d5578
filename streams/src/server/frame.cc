#include "server/frame.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>

namespace tributary::server_internal {

FrameParse ParseFrame(std::string_view buf, const FrameLimits& limits) {
  FrameParse f;
  if (buf.empty()) return f;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(buf.data()),
                                            static_cast<int>(std::min(buf.size(), kMaxFrameHeaderBytes)));
  uint64_t len64 = 0;  // 64 bits: ReadVarint32 would read 2^32 + n as n
  if (!in.ReadVarint64(&len64)) {
    if (buf.size() >= kMaxFrameHeaderBytes) {
      f.kind = FrameParse::kBad;
      f.error = "invalid frame length";
    }
    return f;
  }
  const size_t hdr = static_cast<size_t>(in.CurrentPosition());
  if (len64 > limits.max_frame_bytes) {
    f.kind = FrameParse::kBad;
    f.error = "frame of " + std::to_string(len64) + " bytes is over the limit of " +
              std::to_string(limits.max_frame_bytes) + " bytes";
    return f;
  }
  // Below max_frame_bytes, whose type (ServerOptions) is 32 bits.
  const uint32_t len = static_cast<uint32_t>(len64);
  if (limits.check_token && len > limits.pre_auth_max_frame_bytes) {
    // A stranger's large frame: judge the token in its first bytes before
    // buffering the rest.
    const size_t prefix = std::min<size_t>(len, kTokenPrefixBytes);
    if (buf.size() < hdr + prefix) return f;
    std::string token;
    if (!TokenInPrefix(buf.data() + hdr, prefix, &token) ||
        TokenScopes(token, limits.auth_token, limits.scoped_tokens) == 0) {
      f.kind = FrameParse::kUnauthenticated;
      return f;
    }
    f.token_shown = true;
  }
  f.header_bytes = hdr;
  f.body_bytes = len;
  if (buf.size() >= hdr + len) f.kind = FrameParse::kFrame;
  return f;
}

bool TokenInPrefix(const char* data, size_t size, std::string* token) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(data), static_cast<int>(size));
  for (;;) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) return false;
    if (tag == (1u << 3 | 0)) {  // request_id, varint
      uint64_t ignored;
      if (!in.ReadVarint64(&ignored)) return false;
      continue;
    }
    if (tag != (2u << 3 | 2)) return false;  // not the token: it is absent
    uint32_t len = 0;
    return in.ReadVarint32(&len) && in.ReadString(token, static_cast<int>(len));
  }
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  size_t n = std::max(a.size(), b.size());
  unsigned char diff = static_cast<unsigned char>(a.size() != b.size());
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

size_t CountRequestDocuments(std::string_view body, uint64_t* request_id) {
  using google::protobuf::internal::WireFormatLite;
  *request_id = 0;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(body.data()),
                                            static_cast<int>(body.size()));
  size_t count = 0;
  for (uint32_t tag; (tag = in.ReadTag()) != 0;) {
    const uint32_t field = WireFormatLite::GetTagFieldNumber(tag);
    if (field == 1 && WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_VARINT) {
      if (!in.ReadVarint64(request_id)) return 0;
      continue;
    }
    if ((field == 3 || field == 4) &&
        WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      // LearnRequest / PredictRequest: field 1 is `documents`.
      uint32_t len = 0;
      if (!in.ReadVarint32(&len)) return 0;
      const auto limit = in.PushLimit(static_cast<int>(len));
      for (uint32_t inner; (inner = in.ReadTag()) != 0;) {
        if (WireFormatLite::GetTagFieldNumber(inner) == 1) ++count;
        if (!WireFormatLite::SkipField(&in, inner)) return 0;
      }
      in.PopLimit(limit);
      continue;
    }
    if (!WireFormatLite::SkipField(&in, tag)) return 0;
  }
  return count;
}

bool ParseRequest(std::string_view body, v1::Request* req) {
  return req->ParseFromArray(body.data(), static_cast<int>(body.size()));
}

bool AuthEnabled(std::string_view auth_token, const std::vector<ScopedToken>* scoped) {
  return !auth_token.empty() || (scoped != nullptr && !scoped->empty());
}

uint32_t TokenScopes(std::string_view presented, std::string_view auth_token, const std::vector<ScopedToken>* scoped) {
  if (!AuthEnabled(auth_token, scoped)) return kScopeAll;
  uint32_t scopes = 0;
  // Every token compared (no early exit); an empty token matches nothing.
  if (!auth_token.empty() && ConstantTimeEquals(presented, auth_token)) scopes |= kScopeAll;
  if (scoped != nullptr) {
    for (const ScopedToken& t : *scoped) {
      if (!t.token.empty() && ConstantTimeEquals(presented, t.token)) scopes |= t.scopes;
    }
  }
  return scopes;
}

RequestCheck CheckRequest(const v1::Request& req, std::string_view auth_token, const std::vector<ScopedToken>* scoped,
                          uint32_t* scopes) {
  const uint32_t s = TokenScopes(req.auth_token(), auth_token, scoped);
  if (scopes != nullptr) *scopes = s;
  if (s == 0) return RequestCheck::kUnauthenticated;
  if (req.kind_case() == v1::Request::KIND_NOT_SET) return RequestCheck::kNoKind;
  return RequestCheck::kOk;
}

std::string LearnRequestError(const v1::LearnRequest& lr) {
  if (lr.documents_size() == 0) return "learn request has no documents";
  return "";
}

std::string FrameMessage(const google::protobuf::MessageLite& msg) {
  std::string body;
  msg.SerializeToString(&body);
  uint8_t hdr[kMaxFrameHeaderBytes];
  uint8_t* end = google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(static_cast<uint32_t>(body.size()), hdr);
  std::string out(reinterpret_cast<const char*>(hdr), static_cast<size_t>(end - hdr));
  out += body;
  return out;
}

}  // namespace tributary::server_internal

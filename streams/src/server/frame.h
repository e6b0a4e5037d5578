// Private to the server (streams/src/server/): the framing of the client
// protocol (varint length, then a serialized Request or Response) and the
// checks made on a request from its bytes alone, before any server state is
// touched. Pure functions, no I/O: Connection (connection.cc) feeds them its
// receive buffer, and tests/fuzz/frame_fuzz.cc feeds them arbitrary bytes.
//
// Thread safety: every function here may be called from any thread.
#ifndef TRIBUTARY_STREAMS_SRC_SERVER_FRAME_H_
#define TRIBUTARY_STREAMS_SRC_SERVER_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tributary/server.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary::server_internal {

// A frame length is a varint of at most this many bytes.
constexpr size_t kMaxFrameHeaderBytes = 10;
// A stranger's large frame is judged by the token in its first bytes.
constexpr size_t kTokenPrefixBytes = 1024;

// What the bytes at the start of a connection's receive buffer hold.
struct FrameParse {
  enum Kind {
    kNeedMore,         // not enough bytes yet to decide
    kBad,              // the framing is broken: `error` says why
    kUnauthenticated,  // a stranger's large frame without the right token in its first bytes
    kFrame,            // a whole frame: header_bytes + body_bytes of the buffer
  };
  Kind kind = kNeedMore;
  // kFrame, and kNeedMore while waiting for the body: the length's bytes and
  // the body's (0 and 0 while the length or the token prefix is incomplete).
  size_t header_bytes = 0;
  uint32_t body_bytes = 0;
  // The right token was read in this frame's first bytes: the connection has
  // now shown it (set with kNeedMore or kFrame).
  bool token_shown = false;
  std::string error;  // kBad
};

// How a connection reads its next frame.
struct FrameLimits {
  uint64_t max_frame_bytes = 0;  // a longer frame is kBad
  // When `check_token`: a frame longer than pre_auth_max_frame_bytes must
  // carry `auth_token` in its first kTokenPrefixBytes (TokenInPrefix), else
  // kUnauthenticated. Set while a connection has not shown the token.
  bool check_token = false;
  uint64_t pre_auth_max_frame_bytes = 0;
  std::string_view auth_token;
  const std::vector<ScopedToken>* scoped_tokens = nullptr;  // the other tokens (may be null)
};

// Reads the frame at the start of `buf`. Never reads past buf.size(); the
// result depends only on the bytes up to the frame's end, so a longer buffer
// with the same start gives the same answer once it is not kNeedMore.
FrameParse ParseFrame(std::string_view buf, const FrameLimits& limits);

// The auth_token of a Request read from the first bytes of its frame, which
// protobuf writes in field order (request_id = 1, auth_token = 2, then the
// payload), so a stranger's large frame is judged before it is buffered.
// False when the prefix ends first or another field comes before the token.
bool TokenInPrefix(const char* data, size_t size, std::string* token);

// Time depends only on the lengths, never on where the strings differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// True when the server asks for a token (ServerOptions::auth_token or
// scoped_tokens).
bool AuthEnabled(std::string_view auth_token, const std::vector<ScopedToken>* scoped);

// The scopes `presented` carries: kScopeAll for `auth_token`, a scoped
// token's own, 0 for none (a wrong token); kScopeAll when no token is asked
// for. Compares with every token (the time does not say which matched).
uint32_t TokenScopes(std::string_view presented, std::string_view auth_token, const std::vector<ScopedToken>* scoped);

// The documents a Request's body holds (its learn or predict payload's
// repeated `documents`), counted by walking the wire without parsing them,
// and its request_id when it comes first (protobuf writes it first); 0 and
// 0 for a body that is not a Request (the parse then says so).
size_t CountRequestDocuments(std::string_view body, uint64_t* request_id);

// Parses a frame's body; false when it is not a Request.
bool ParseRequest(std::string_view body, v1::Request* req);

// The checks Connection::Handle makes on a parsed request before it looks at
// the server's state, in its order.
enum class RequestCheck {
  kOk,
  kUnauthenticated,  // `auth_token` is set and the request carries another
  kNoKind,           // none of learn, predict, ...: INVALID_REQUEST kNoKindMessage
};
// *scopes (when given) gets the scopes of the request's token (TokenScopes).
RequestCheck CheckRequest(const v1::Request& req, std::string_view auth_token,
                          const std::vector<ScopedToken>* scoped = nullptr, uint32_t* scopes = nullptr);
constexpr char kNoKindMessage[] = "request has no kind (learn, predict, ...)";

// A learn request that is refused whatever the model: "" when acceptable.
std::string LearnRequestError(const v1::LearnRequest& lr);

// `msg` serialized and framed (varint length, then the bytes).
std::string FrameMessage(const google::protobuf::MessageLite& msg);

}  // namespace tributary::server_internal

#endif  // TRIBUTARY_STREAMS_SRC_SERVER_FRAME_H_

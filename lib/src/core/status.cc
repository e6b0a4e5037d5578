#include "tributary/status.h"

namespace tributary {

namespace {
const char* CodeName(Status::Code code) {
  switch (code) {
    case Status::Code::kOk:
      return "OK";
    case Status::Code::kInvalidArgument:
      return "invalid argument";
    case Status::Code::kInvalidDocument:
      return "invalid document";
    case Status::Code::kCorruption:
      return "corruption";
    case Status::Code::kNotFound:
      return "not found";
    case Status::Code::kIOError:
      return "I/O error";
    case Status::Code::kPluginError:
      return "plugin error";
    case Status::Code::kNumeric:
      return "numeric error";
    case Status::Code::kInternal:
      return "internal error";
  }
  return "unknown";
}
}  // namespace

const std::string& Status::message() const {
  static const std::string kEmpty;
  return rep_ ? rep_->message : kEmpty;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(rep_->code)) + ": " + rep_->message;
}

Status Status::WithContext(std::string_view prefix) const {
  if (ok()) return *this;
  std::string msg(prefix);
  msg += ": ";
  msg += rep_->message;
  return Status(rep_->code, msg);
}

Status Status::WithFile(std::string_view path) const {
  std::string quoted = "'";
  quoted += path;
  quoted += "'";
  if (ok() || rep_->message.find(quoted) != std::string::npos) return *this;
  return WithContext(quoted);
}

}  // namespace tributary

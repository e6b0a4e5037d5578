// Status: the result of an operation that can fail, LevelDB style.
//
// OK costs one pointer and no allocation. Errors carry a code and a message
// that names the document, file or field and says what was expected and what
// was found. The library never throws for expected failures and never prints.
#ifndef TRIBUTARY_STATUS_H_
#define TRIBUTARY_STATUS_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace tributary {

class Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,  // a bad option, flag or schema
    kInvalidDocument,  // one document is malformed or does not fit the model
    kCorruption,       // a file or frame is damaged, truncated or foreign
    kNotFound,         // a file or plugin is missing
    kIOError,
    kPluginError,  // a plugin refused to load or failed
    kNumeric,      // NaN / inf / infeasible statistics
    kInternal,
  };

  Status() noexcept = default;
  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string_view msg) { return Status(Code::kInvalidArgument, msg); }
  static Status InvalidDocument(std::string_view msg) { return Status(Code::kInvalidDocument, msg); }
  static Status Corruption(std::string_view msg) { return Status(Code::kCorruption, msg); }
  static Status NotFound(std::string_view msg) { return Status(Code::kNotFound, msg); }
  static Status IOError(std::string_view msg) { return Status(Code::kIOError, msg); }
  static Status PluginError(std::string_view msg) { return Status(Code::kPluginError, msg); }
  static Status Numeric(std::string_view msg) { return Status(Code::kNumeric, msg); }
  static Status Internal(std::string_view msg) { return Status(Code::kInternal, msg); }
  // An error of `code` (one received by its number, e.g. from another MPI
  // rank); kOk or a number outside the enum gives kInternal.
  static Status FromCode(Code code, std::string_view msg) {
    return Status(code > Code::kOk && code <= Code::kInternal ? code : Code::kInternal, msg);
  }

  bool ok() const { return rep_ == nullptr; }
  Code code() const { return rep_ ? rep_->code : Code::kOk; }
  bool IsInvalidDocument() const { return code() == Code::kInvalidDocument; }
  bool IsCorruption() const { return code() == Code::kCorruption; }
  bool IsNotFound() const { return code() == Code::kNotFound; }
  bool IsPluginError() const { return code() == Code::kPluginError; }
  const std::string& message() const;
  // "<code name>: <message>", or "OK".
  std::string ToString() const;
  // Returns a copy whose message is "<prefix>: <message>".
  Status WithContext(std::string_view prefix) const;

  Status(const Status& other) : rep_(other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr) {}
  Status& operator=(const Status& other) {
    if (this != &other) rep_ = other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr;
    return *this;
  }
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

 private:
  struct Rep {
    Code code;
    std::string message;
  };
  Status(Code code, std::string_view msg) : rep_(std::make_unique<Rep>(Rep{code, std::string(msg)})) {}
  std::unique_ptr<Rep> rep_;
};

// A value or the Status explaining why there is none.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {}  // NOLINT(google-explicit-constructor)
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace tributary

#define TRIB_STATUS_CONCAT_INNER_(a, b) a##b
#define TRIB_STATUS_CONCAT_(a, b) TRIB_STATUS_CONCAT_INNER_(a, b)
// Returns the Status of `expr` from the enclosing function if it is an error.
#define TRIB_RETURN_IF_ERROR(expr)                                                                             \
  do {                                                                                                         \
    ::tributary::Status TRIB_STATUS_CONCAT_(trib_status_, __LINE__) = (expr);                                  \
    if (!TRIB_STATUS_CONCAT_(trib_status_, __LINE__).ok()) return TRIB_STATUS_CONCAT_(trib_status_, __LINE__); \
  } while (0)

#endif  // TRIBUTARY_STATUS_H_

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

/// The outcome of an operation that can fail: OK, or an error code and a message.
///
/// An OK Status holds a null pointer; an error owns its code and message. Copies are deep, so a Status can be
/// passed between threads by value; one object is not safe to modify from two threads at once.
class [[nodiscard]] Status {
 public:
  /// What kind of failure a Status reports; the caller can branch on it without parsing the message.
  enum class Code {
    kOk = 0,           ///< success; only an OK Status has this code
    kInvalidArgument,  ///< a bad option, flag or schema
    kInvalidDocument,  ///< one document is malformed or does not fit the model
    kCorruption,       ///< a file or frame is damaged, truncated or foreign
    kNotFound,         ///< a file or plugin is missing
    kIOError,          ///< the operating system, network or MPI failed to read, write or communicate
    kPluginError,      ///< a plugin refused to load or failed
    kNumeric,          ///< NaN / inf / infeasible statistics
    kInternal,         ///< a broken invariant in Tributary itself, or a failure while undoing a failed step
  };

  /// An OK Status.
  Status() noexcept = default;
  /// Returns an OK Status.
  static Status OK() { return Status(); }
  /// A bad option, flag, configuration or schema given by the caller; also a plugin's
  /// TRIB_ERR_INVALID_ARGUMENT.
  static Status InvalidArgument(std::string_view msg) { return Status(Code::kInvalidArgument, msg); }
  /// One document is malformed or does not fit the model (unknown term id, wrong number of features, category
  /// out of range); the rest of the stream can go on.
  static Status InvalidDocument(std::string_view msg) { return Status(Code::kInvalidDocument, msg); }
  /// A snapshot, stream frame or write-ahead log is damaged, truncated or in a foreign format.
  static Status Corruption(std::string_view msg) { return Status(Code::kCorruption, msg); }
  /// A file, plugin or remote stream or group does not exist (for files: the OS reported ENOENT).
  static Status NotFound(std::string_view msg) { return Status(Code::kNotFound, msg); }
  /// Reading, writing, renaming or listening failed for a reason other than a missing file, or MPI failed.
  static Status IOError(std::string_view msg) { return Status(Code::kIOError, msg); }
  /// A plugin could not be loaded, broke the plugin ABI contract (bad index, incomplete hook table, version
  /// mismatch with a snapshot) or failed with an unrecognised error code.
  static Status PluginError(std::string_view msg) { return Status(Code::kPluginError, msg); }
  /// A score, log-probability or expected statistic is NaN or infinite, or the statistics became infeasible.
  static Status Numeric(std::string_view msg) { return Status(Code::kNumeric, msg); }
  /// A broken invariant inside Tributary, or a failed step whose rollback failed too (the model may then be
  /// inconsistent).
  static Status Internal(std::string_view msg) { return Status(Code::kInternal, msg); }
  /// An error of `code` (one received by its number, e.g. from another MPI
  /// rank); kOk or a number outside the enum gives kInternal.
  static Status FromCode(Code code, std::string_view msg) {
    return Status(code > Code::kOk && code <= Code::kInternal ? code : Code::kInternal, msg);
  }

  /// True if the operation succeeded.
  bool ok() const { return rep_ == nullptr; }
  /// The error code; Code::kOk for an OK Status.
  Code code() const { return rep_ ? rep_->code : Code::kOk; }
  /// True if code() is Code::kInvalidDocument.
  bool IsInvalidDocument() const { return code() == Code::kInvalidDocument; }
  /// True if code() is Code::kCorruption.
  bool IsCorruption() const { return code() == Code::kCorruption; }
  /// True if code() is Code::kNotFound.
  bool IsNotFound() const { return code() == Code::kNotFound; }
  /// True if code() is Code::kPluginError.
  bool IsPluginError() const { return code() == Code::kPluginError; }
  /// The error message without the code name; empty for an OK Status. Valid as long as this Status is unchanged.
  const std::string& message() const;
  /// "<code name>: <message>", or "OK".
  std::string ToString() const;
  /// Returns a copy whose message is "<prefix>: <message>".
  Status WithContext(std::string_view prefix) const;
  /// A copy naming the file it is about: "'PATH': message", unless the
  /// message names the file (in quotes) already, as the stream reader's and
  /// Model::Load's errors do. OK stays OK.
  Status WithFile(std::string_view path) const;

  /// Deep copy: the copy owns its own message.
  Status(const Status& other) : rep_(other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr) {}
  /// Deep copy assignment.
  Status& operator=(const Status& other) {
    if (this != &other) rep_ = other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr;
    return *this;
  }
  /// Moves without allocating; the moved-from Status is OK.
  Status(Status&&) noexcept = default;
  /// Move assignment; the moved-from Status is OK.
  Status& operator=(Status&&) noexcept = default;

 private:
  struct Rep {
    Code code;
    std::string message;
  };
  Status(Code code, std::string_view msg) : rep_(std::make_unique<Rep>(Rep{code, std::string(msg)})) {}
  std::unique_ptr<Rep> rep_;
};

/// A value or the Status explaining why there is none.
///
/// The accessors value(), operator-> and operator* require ok(); calling them on an error is undefined behavior.
template <typename T>
class [[nodiscard]] Result {
 public:
  /// A successful result holding `value`.
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  /// A failed result; `status` must be an error (an OK one gives a Result whose ok() is true but has no value).
  Result(Status status) : status_(std::move(status)) {}  // NOLINT(google-explicit-constructor)
  /// True if this holds a value.
  bool ok() const { return status_.ok(); }
  /// OK if this holds a value, else the error.
  const Status& status() const { return status_; }
  /// The value; requires ok().
  T& value() & { return *value_; }
  /// The value; requires ok().
  const T& value() const& { return *value_; }
  /// Moves the value out of an rvalue Result; requires ok().
  T&& value() && { return std::move(*value_); }
  /// Member access to the value; requires ok().
  T* operator->() { return &*value_; }
  /// Member access to the value; requires ok().
  const T* operator->() const { return &*value_; }
  /// The value; requires ok().
  T& operator*() { return *value_; }
  /// The value; requires ok().
  const T& operator*() const { return *value_; }

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

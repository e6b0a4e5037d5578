// The file-system seam (LevelDB's Env): every byte Tributary reads or writes
// to storage goes through an Env, so tests can inject faults (a failed
// fsync, a full disk, a torn write, a failed rename) into snapshots, the
// write-ahead log and document streams alike, and an embedder can redirect
// storage. Env::Default() is POSIX.
//
// Error contract: every failure is a Status naming the path and the
// operation ("fsync 'x': No space left on device"); NotFound when the file
// does not exist, IOError otherwise. No method throws.
//
// Thread safety: Env::Default() may be used from any number of threads. A
// file object is used by one thread at a time.
#ifndef TRIBUTARY_ENV_H_
#define TRIBUTARY_ENV_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tributary/status.h"

namespace tributary {

/// A file read from start to end.
class SequentialFile {
 public:
  virtual ~SequentialFile() = default;
  /// Reads up to `n` bytes into `buf`; *got = 0 means end of file. Retries
  /// interrupted reads.
  virtual Status Read(size_t n, char* buf, size_t* got) = 0;
  /// The name errors use ("<stdin>" for standard input).
  virtual const std::string& name() const = 0;
};

/// A file written at its end.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  /// Writes all of `data` at the end of the file (retrying short and interrupted writes); not durable until
  /// Sync.
  virtual Status Append(std::string_view data) = 0;
  /// Writes `pieces` in order at the end of the file, as one Append of their
  /// concatenation would (a wrapper that injects faults counts it as one
  /// write). The default appends them one by one.
  virtual Status AppendPieces(std::span<const std::string_view> pieces) {
    for (std::string_view p : pieces) TRIB_RETURN_IF_ERROR(Append(p));
    return Status::OK();
  }
  /// Makes everything appended durable (fdatasync). After a failed Sync the
  /// file's contents can no longer be trusted: callers treat it as fatal for
  /// what they had not yet made durable.
  virtual Status Sync() = 0;
  /// Cuts the file back to its first `size` bytes.
  virtual Status Truncate(uint64_t size) = 0;
  /// Closes the file and reports what closing it returned; nothing may be called after it but name(). The
  /// destructor closes a file not yet closed, ignoring errors. Standard output is never closed.
  virtual Status Close() = 0;
  /// The name errors use (the path, or "<stdout>" for standard output).
  virtual const std::string& name() const = 0;
};

/// A lock on a file (Env::LockFile), released when destroyed.
class FileLock {
 public:
  virtual ~FileLock() = default;
};

/// The file-system operations Tributary uses (see the file comment for the error and thread-safety contract).
class Env {
 public:
  virtual ~Env() = default;
  /// POSIX files; never deleted.
  static Env* Default();

  /// Opens `path` for reading; "-" is standard input (not closed on delete).
  virtual Result<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path) = 0;
  /// Creates or truncates `path`; "-" is standard output (not closed).
  virtual Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) = 0;
  /// Opens `path` for appending, creating it if needed.
  virtual Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) = 0;

  /// Renames `from` to `to`, atomically replacing `to` if it exists. Env::Default() reports every failure,
  /// a missing `from` included, as IOError.
  virtual Status RenameFile(const std::string& from, const std::string& to) = 0;
  /// Deletes the file `path`; NotFound if there is none.
  virtual Status RemoveFile(const std::string& path) = 0;
  /// Creates `dir` and its parents; OK when it exists.
  virtual Status CreateDirs(const std::string& dir) = 0;
  /// Makes the directory's entries (creations, renames, removals) durable.
  virtual Status SyncDir(const std::string& dir) = 0;
  /// Names (not paths) of the entries of `dir`, unsorted.
  virtual Status GetChildren(const std::string& dir, std::vector<std::string>* names) = 0;
  /// True if `path` names an existing file or directory.
  virtual bool FileExists(const std::string& path) = 0;
  /// The size of the file `path` in bytes.
  virtual Result<uint64_t> FileSize(const std::string& path) = 0;
  /// What `path` names (following symbolic links).
  enum class FileKind {
    kNone,       ///< nothing (or it cannot be looked at)
    kRegular,    ///< a regular file
    kDirectory,  ///< a directory
    kOther       ///< a device, FIFO or socket
  };
  /// Env::Default() asks stat(2); this default answers from FileExists
  /// (kRegular or kNone), for Envs without special files.
  virtual FileKind GetFileKind(const std::string& path) {
    return FileExists(path) ? FileKind::kRegular : FileKind::kNone;
  }

  /// Takes an exclusive lock on `path` (created if needed) for as long as the
  /// returned FileLock lives, and writes `holder` into the file (who holds
  /// it, for the error a second taker gets). Env::Default() uses flock(2):
  /// the lock excludes other processes and other LockFile calls in this one,
  /// and dies with the process. Errors: IOError "... is locked by <what the
  /// file says>" when held; IOError naming the path otherwise. The base
  /// implementation (for Envs without files of their own) locks within this
  /// process only.
  virtual Result<std::unique_ptr<FileLock>> LockFile(const std::string& path, std::string_view holder);

  /// Reads a whole file through NewSequentialFile.
  Status ReadFileToString(const std::string& path, std::string* out);
  /// Writes `data` to `path` atomically and durably: a temporary file in the
  /// same directory, Sync, rename over `path`, SyncDir. A crash leaves the old
  /// file or the new one, never a mix; on error the temporary is removed.
  /// `path` must be a regular file or a new path (InvalidArgument otherwise:
  /// renaming over /dev/null, run as root, would replace the device).
  Status WriteFileAtomically(const std::string& path, std::string_view data);
  /// The same for a file made of `pieces` in order (each appended as it
  /// lies in memory: a snapshot's statistics are written from the model's
  /// own array, with no copy of the file in between).
  Status WriteFileAtomically(const std::string& path, std::span<const std::string_view> pieces);
};

/// An Env that forwards everything to another (for tests and embedders that
/// override a few methods).
class EnvWrapper : public Env {
 public:
  /// Forwards to `target`, which is not owned and must outlive this wrapper.
  explicit EnvWrapper(Env* target) : target_(target) {}
  /// The Env calls are forwarded to.
  Env* target() const { return target_; }
  Result<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& p) override {
    return target_->NewSequentialFile(p);
  }
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& p) override {
    return target_->NewWritableFile(p);
  }
  Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& p) override {
    return target_->NewAppendableFile(p);
  }
  Status RenameFile(const std::string& f, const std::string& t) override { return target_->RenameFile(f, t); }
  Status RemoveFile(const std::string& p) override { return target_->RemoveFile(p); }
  Status CreateDirs(const std::string& d) override { return target_->CreateDirs(d); }
  Status SyncDir(const std::string& d) override { return target_->SyncDir(d); }
  Status GetChildren(const std::string& d, std::vector<std::string>* n) override { return target_->GetChildren(d, n); }
  bool FileExists(const std::string& p) override { return target_->FileExists(p); }
  FileKind GetFileKind(const std::string& p) override { return target_->GetFileKind(p); }
  Result<uint64_t> FileSize(const std::string& p) override { return target_->FileSize(p); }
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& p, std::string_view h) override {
    return target_->LockFile(p, h);
  }

 private:
  Env* target_;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENV_H_

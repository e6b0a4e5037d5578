// Env::Default(): POSIX files. Every error names the path and the call.
#include "tributary/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>

namespace tributary {

namespace {

Status PosixError(const std::string& what, const std::string& path, int err) {
  std::string msg = what + " '" + path + "': " + std::strerror(err);
  if (err == ENOENT) return Status::NotFound(msg);
  return Status::IOError(msg);
}

class PosixSequentialFile : public SequentialFile {
 public:
  PosixSequentialFile(int fd, std::string name, bool owned) : fd_(fd), name_(std::move(name)), owned_(owned) {}
  ~PosixSequentialFile() override {
    if (owned_) ::close(fd_);
  }
  Status Read(size_t n, char* buf, size_t* got) override {
    for (;;) {
      ssize_t r = ::read(fd_, buf, n);
      if (r >= 0) {
        *got = static_cast<size_t>(r);
        return Status::OK();
      }
      if (errno != EINTR) return PosixError("read", name_, errno);
    }
  }
  const std::string& name() const override { return name_; }

 private:
  int fd_;
  std::string name_;
  bool owned_;
};

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(int fd, std::string name, bool owned) : fd_(fd), name_(std::move(name)), owned_(owned) {}
  ~PosixWritableFile() override {
    if (owned_ && fd_ >= 0) ::close(fd_);
  }
  Status Append(std::string_view data) override {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::write(fd_, data.data() + off, data.size() - off);
      if (n < 0) {
        if (errno == EINTR) continue;
        return PosixError("write", name_, errno);
      }
      off += static_cast<size_t>(n);
    }
    return Status::OK();
  }
  Status AppendPieces(std::span<const std::string_view> pieces) override {
    // One writev for up to kMax pieces (retrying short and interrupted
    // writes from where they stopped).
    constexpr size_t kMax = 16;
    if (pieces.size() > kMax) return WritableFile::AppendPieces(pieces);
    iovec iov[kMax];
    size_t n = 0;
    for (std::string_view p : pieces) {
      if (p.empty()) continue;
      iov[n].iov_base = const_cast<char*>(p.data());
      iov[n].iov_len = p.size();
      ++n;
    }
    iovec* at = iov;
    while (n > 0) {
      ssize_t w = ::writev(fd_, at, static_cast<int>(n));
      if (w < 0) {
        if (errno == EINTR) continue;
        return PosixError("write", name_, errno);
      }
      size_t done = static_cast<size_t>(w);
      while (n > 0 && done >= at->iov_len) {
        done -= at->iov_len;
        ++at;
        --n;
      }
      if (n > 0) {
        at->iov_base = static_cast<char*>(at->iov_base) + done;
        at->iov_len -= done;
      }
    }
    return Status::OK();
  }
  Status Sync() override {
    if (::fdatasync(fd_) != 0) {
      // Pipes and terminals cannot be synced; there is nothing to make durable.
      if (errno == EINVAL || errno == EROFS) return Status::OK();
      return PosixError("fdatasync", name_, errno);
    }
    return Status::OK();
  }
  Status Truncate(uint64_t size) override {
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) return PosixError("ftruncate", name_, errno);
    return Status::OK();
  }
  Status Close() override {
    if (!owned_ || fd_ < 0) return Status::OK();
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return PosixError("close", name_, errno);
    return Status::OK();
  }
  const std::string& name() const override { return name_; }

 private:
  int fd_;
  std::string name_;
  bool owned_;
};

class PosixFileLock : public FileLock {
 public:
  explicit PosixFileLock(int fd) : fd_(fd) {}
  ~PosixFileLock() override { ::close(fd_); }  // closing the only descriptor releases the flock

 private:
  int fd_;
};

// Env's base LockFile: paths locked in this process.
class ProcessFileLock : public FileLock {
 public:
  ProcessFileLock(std::set<std::string>* held, std::mutex* mu, std::string path)
      : held_(held), mu_(mu), path_(std::move(path)) {}
  ~ProcessFileLock() override {
    std::lock_guard<std::mutex> l(*mu_);
    held_->erase(path_);
  }

 private:
  std::set<std::string>* held_;
  std::mutex* mu_;
  std::string path_;
};

class PosixEnv : public Env {
 public:
  Result<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path) override {
    if (path == "-") return std::unique_ptr<SequentialFile>(new PosixSequentialFile(0, "<stdin>", false));
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return PosixError("cannot open", path, errno);
    return std::unique_ptr<SequentialFile>(new PosixSequentialFile(fd, path, true));
  }
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    if (path == "-") return std::unique_ptr<WritableFile>(new PosixWritableFile(1, "<stdout>", false));
    return Open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC);
  }
  Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) override {
    return Open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC);
  }
  Status RenameFile(const std::string& from, const std::string& to) override {
    if (std::rename(from.c_str(), to.c_str()) != 0) {
      return Status::IOError("rename '" + from + "' to '" + to + "': " + std::strerror(errno));
    }
    return Status::OK();
  }
  Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return PosixError("remove", path, errno);
    return Status::OK();
  }
  Status CreateDirs(const std::string& dir) override {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return Status::IOError("cannot create directory '" + dir + "': " + ec.message());
    return Status::OK();
  }
  Status SyncDir(const std::string& dir) override {
    int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return PosixError("cannot open directory", dir, errno);
    Status st;
    if (::fsync(fd) != 0 && errno != EINVAL) st = PosixError("fsync directory", dir, errno);
    ::close(fd);
    return st;
  }
  Status GetChildren(const std::string& dir, std::vector<std::string>* names) override {
    names->clear();
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return PosixError("cannot list directory", dir, errno);
    while (struct dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      names->emplace_back(e->d_name);
    }
    ::closedir(d);
    return Status::OK();
  }
  bool FileExists(const std::string& path) override { return ::access(path.c_str(), F_OK) == 0; }
  FileKind GetFileKind(const std::string& path) override {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return FileKind::kNone;
    if (S_ISREG(st.st_mode)) return FileKind::kRegular;
    if (S_ISDIR(st.st_mode)) return FileKind::kDirectory;
    return FileKind::kOther;
  }
  Result<uint64_t> FileSize(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return PosixError("stat", path, errno);
    return static_cast<uint64_t>(st.st_size);
  }
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path, std::string_view holder) override {
    // flock(2), not fcntl(2): a second open file description in this process
    // is refused too (fcntl locks are per process), and no close() of another
    // descriptor of the file can drop it.
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return PosixError("cannot open lock file", path, errno);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      std::string says;
      char buf[512];
      const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
      if (n > 0) says.assign(buf, static_cast<size_t>(n));
      while (!says.empty() && (says.back() == '\n' || says.back() == '\0')) says.pop_back();
      ::close(fd);
      if (err == EWOULDBLOCK) {
        return Status::IOError("'" + path + "' is locked by " + (says.empty() ? "another process" : says));
      }
      return PosixError("flock", path, err);
    }
    // Who holds it, for the next taker's error (not needed for the lock).
    if (::ftruncate(fd, 0) == 0) {
      size_t off = 0;
      while (off < holder.size()) {
        const ssize_t w = ::pwrite(fd, holder.data() + off, holder.size() - off, static_cast<off_t>(off));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        off += static_cast<size_t>(w);
      }
    }
    return std::unique_ptr<FileLock>(new PosixFileLock(fd));
  }

 private:
  static Result<std::unique_ptr<WritableFile>> Open(const std::string& path, int flags) {
    int fd = ::open(path.c_str(), flags, 0644);
    if (fd < 0) return PosixError("cannot create", path, errno);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(fd, path, true));
  }
};

std::string DirOf(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

}  // namespace

Env* Env::Default() {
  static PosixEnv* env = new PosixEnv();  // never destroyed: usable during static destruction
  return env;
}

Result<std::unique_ptr<FileLock>> Env::LockFile(const std::string& path, std::string_view holder) {
  static std::mutex* mu = new std::mutex();
  static auto* held = new std::set<std::string>();
  (void)holder;
  std::lock_guard<std::mutex> l(*mu);
  if (!held->insert(path).second) return Status::IOError("'" + path + "' is locked by this process");
  return std::unique_ptr<FileLock>(new ProcessFileLock(held, mu, path));
}

Status Env::ReadFileToString(const std::string& path, std::string* out) {
  out->clear();
  auto f = NewSequentialFile(path);
  if (!f.ok()) return f.status();
  // Read into a buffer of its own, appending what came: growing `out` by a
  // chunk per read zero-filled 64 KiB, and past the first chunk reallocated
  // 128 KiB (an mmap and munmap), for every small file.
  constexpr size_t kChunk = 1 << 16;
  std::unique_ptr<char[]> buf(new char[kChunk]);
  for (;;) {
    size_t got = 0;
    Status st = (*f)->Read(kChunk, buf.get(), &got);
    out->append(buf.get(), std::min(got, kChunk));
    TRIB_RETURN_IF_ERROR(st);
    if (got == 0) return Status::OK();
  }
}

Status Env::WriteFileAtomically(const std::string& path, std::string_view data) {
  return WriteFileAtomically(path, std::span<const std::string_view>(&data, 1));
}

Status Env::WriteFileAtomically(const std::string& path, std::span<const std::string_view> pieces) {
  // The rename below replaces whatever `path` names: only a regular file or
  // nothing may be replaced.
  if (const FileKind kind = GetFileKind(path); kind == FileKind::kDirectory || kind == FileKind::kOther) {
    return Status::InvalidArgument("'" + path + "': expected a regular file or a new path to write, found " +
                                   (kind == FileKind::kDirectory ? "a directory" : "a device, FIFO or socket") +
                                   " (the file is written beside it and renamed over it)");
  }
  // Unique per process and call, so concurrent writers of one path never
  // share a temporary.
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  auto f = NewWritableFile(tmp);
  if (!f.ok()) return f.status();
  Status st = (*f)->AppendPieces(pieces);
  if (st.ok()) st = (*f)->Sync();
  Status closed = (*f)->Close();
  if (st.ok()) st = closed;
  if (st.ok()) st = RenameFile(tmp, path);
  if (!st.ok()) {
    (void)RemoveFile(tmp);  // best effort; the error that matters is `st`
    return st;
  }
  return SyncDir(DirOf(path));
}

}  // namespace tributary

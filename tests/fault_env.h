// A fault-injecting Env for tests: fails chosen operations on files whose
// path contains a given text, the way a full disk, a failing device or an
// interrupted write would, over the real POSIX files underneath.
#ifndef TRIBUTARY_TESTS_FAULT_ENV_H_
#define TRIBUTARY_TESTS_FAULT_ENV_H_

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tributary/env.h"

namespace tributary::testing {

class FaultEnv : public EnvWrapper {
 public:
  enum class Op { kCreate, kAppend, kSync, kTruncate, kRead, kRename, kRemove };
  struct Fault {
    Op op;
    std::string path_contains;  // applies to paths containing this ("" = all)
    int after = 0;              // matching calls that succeed first
    int error = EIO;            // errno reported
    bool torn = false;          // kAppend: write the first half, then fail
    bool once = false;          // fire once, then succeed again
    int delay_ms = 0;           // > 0: a slow device: wait this long, then succeed
  };

  explicit FaultEnv(Env* base = Env::Default()) : EnvWrapper(base) {}

  void Add(Fault f) {
    std::lock_guard<std::mutex> l(mu_);
    faults_.push_back(Rule{std::move(f), 0, false});
  }
  void Clear() {
    std::lock_guard<std::mutex> l(mu_);
    faults_.clear();
  }
  int fired() const {
    std::lock_guard<std::mutex> l(mu_);
    return fired_;
  }

  // Status for `op` on `path`: an injected error, or OK. `torn` is set when
  // the fault asks for a partial write.
  Status Check(Op op, const std::string& path, const char* what, bool* torn = nullptr) {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& r : faults_) {
      if (r.f.op != op || r.spent) continue;
      if (!r.f.path_contains.empty() && path.find(r.f.path_contains) == std::string::npos) continue;
      if (r.calls++ < r.f.after) continue;
      if (r.f.once) r.spent = true;
      ++fired_;
      if (r.f.delay_ms > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(r.f.delay_ms));
        return Status::OK();
      }
      if (torn) *torn = r.f.torn;
      return Status::IOError(std::string(what) + " '" + path + "': " + std::strerror(r.f.error) + " (injected)");
    }
    return Status::OK();
  }

  Result<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& p) override {
    auto f = target()->NewSequentialFile(p);
    if (!f.ok()) return f;
    return std::unique_ptr<SequentialFile>(new Reader(this, std::move(f).value()));
  }
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& p) override {
    TRIB_RETURN_IF_ERROR(Check(Op::kCreate, p, "cannot create"));
    auto f = target()->NewWritableFile(p);
    if (!f.ok()) return f;
    return std::unique_ptr<WritableFile>(new Writer(this, std::move(f).value()));
  }
  Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& p) override {
    TRIB_RETURN_IF_ERROR(Check(Op::kCreate, p, "cannot create"));
    auto f = target()->NewAppendableFile(p);
    if (!f.ok()) return f;
    return std::unique_ptr<WritableFile>(new Writer(this, std::move(f).value()));
  }
  Status RenameFile(const std::string& from, const std::string& to) override {
    TRIB_RETURN_IF_ERROR(Check(Op::kRename, from, "rename"));
    return target()->RenameFile(from, to);
  }
  Status RemoveFile(const std::string& p) override {
    TRIB_RETURN_IF_ERROR(Check(Op::kRemove, p, "remove"));
    return target()->RemoveFile(p);
  }

 private:
  struct Rule {
    Fault f;
    int calls;
    bool spent;
  };

  class Reader : public SequentialFile {
   public:
    Reader(FaultEnv* env, std::unique_ptr<SequentialFile> inner) : env_(env), inner_(std::move(inner)) {}
    Status Read(size_t n, char* buf, size_t* got) override {
      TRIB_RETURN_IF_ERROR(env_->Check(Op::kRead, inner_->name(), "read"));
      return inner_->Read(n, buf, got);
    }
    const std::string& name() const override { return inner_->name(); }

   private:
    FaultEnv* env_;
    std::unique_ptr<SequentialFile> inner_;
  };

  class Writer : public WritableFile {
   public:
    Writer(FaultEnv* env, std::unique_ptr<WritableFile> inner) : env_(env), inner_(std::move(inner)) {}
    Status Append(std::string_view data) override {
      bool torn = false;
      Status st = env_->Check(Op::kAppend, inner_->name(), "write", &torn);
      if (!st.ok()) {
        if (torn) (void)inner_->Append(data.substr(0, data.size() / 2));
        return st;
      }
      return inner_->Append(data);
    }
    // One write, as the Posix file's writev: one fault, a torn one writing
    // the first half of the concatenation.
    Status AppendPieces(std::span<const std::string_view> pieces) override {
      bool torn = false;
      Status st = env_->Check(Op::kAppend, inner_->name(), "write", &torn);
      if (!st.ok()) {
        if (torn) {
          std::string all;
          for (std::string_view p : pieces) all.append(p);
          (void)inner_->Append(std::string_view(all).substr(0, all.size() / 2));
        }
        return st;
      }
      return inner_->AppendPieces(pieces);
    }
    Status Sync() override {
      TRIB_RETURN_IF_ERROR(env_->Check(Op::kSync, inner_->name(), "fdatasync"));
      return inner_->Sync();
    }
    Status Truncate(uint64_t size) override {
      TRIB_RETURN_IF_ERROR(env_->Check(Op::kTruncate, inner_->name(), "ftruncate"));
      return inner_->Truncate(size);
    }
    Status Close() override { return inner_->Close(); }
    const std::string& name() const override { return inner_->name(); }

   private:
    FaultEnv* env_;
    std::unique_ptr<WritableFile> inner_;
  };

  mutable std::mutex mu_;
  std::vector<Rule> faults_;
  int fired_ = 0;
};

}  // namespace tributary::testing

#endif  // TRIBUTARY_TESTS_FAULT_ENV_H_

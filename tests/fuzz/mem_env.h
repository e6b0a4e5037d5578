// An in-memory Env for the fuzz targets: files are strings in a map, so a
// target can lay out a stream, a snapshot or a log directory from its input
// in microseconds and without touching the disk, and reads can be made short
// (at most `max_read` bytes per Read) to exercise the readers' buffering.
//
// Thread safety: none (a fuzz target runs one input at a time).
#ifndef TRIBUTARY_TESTS_FUZZ_MEM_ENV_H_
#define TRIBUTARY_TESTS_FUZZ_MEM_ENV_H_

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tributary/env.h"

namespace tributary::fuzz {

class MemEnv : public Env {
 public:
  // Contents of every file, by path.
  std::map<std::string, std::string>& files() { return files_; }
  // Largest chunk one Read returns (at least 1).
  void set_max_read(size_t n) { max_read_ = std::max<size_t>(n, 1); }

  Result<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path) override {
    auto it = files_.find(path);
    if (it == files_.end()) return Status::NotFound("cannot open '" + path + "': no such file (in memory)");
    return std::unique_ptr<SequentialFile>(new Reader(it->second, path, max_read_));
  }
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    files_[path].clear();
    return std::unique_ptr<WritableFile>(new Writer(this, path));
  }
  Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) override {
    files_[path];
    return std::unique_ptr<WritableFile>(new Writer(this, path));
  }
  Status RenameFile(const std::string& from, const std::string& to) override {
    auto it = files_.find(from);
    if (it == files_.end()) return Status::NotFound("rename '" + from + "': no such file (in memory)");
    std::string data = std::move(it->second);
    files_.erase(it);
    files_[to] = std::move(data);
    return Status::OK();
  }
  Status RemoveFile(const std::string& path) override {
    if (files_.erase(path) == 0) return Status::NotFound("remove '" + path + "': no such file (in memory)");
    return Status::OK();
  }
  Status CreateDirs(const std::string& dir) override {
    for (std::filesystem::path p(dir); !p.empty() && p != p.root_path(); p = p.parent_path()) dirs_.insert(p.string());
    return Status::OK();
  }
  Status SyncDir(const std::string&) override { return Status::OK(); }
  Status GetChildren(const std::string& dir, std::vector<std::string>* names) override {
    names->clear();
    std::set<std::string> found;
    for (const auto& [path, data] : files_) {
      if (std::filesystem::path(path).parent_path() == std::filesystem::path(dir)) {
        found.insert(std::filesystem::path(path).filename().string());
      }
    }
    for (const auto& d : dirs_) {
      if (std::filesystem::path(d).parent_path() == std::filesystem::path(dir)) {
        found.insert(std::filesystem::path(d).filename().string());
      }
    }
    names->assign(found.begin(), found.end());
    return Status::OK();
  }
  bool FileExists(const std::string& path) override { return files_.count(path) > 0 || dirs_.count(path) > 0; }
  Result<uint64_t> FileSize(const std::string& path) override {
    auto it = files_.find(path);
    if (it == files_.end()) return Status::NotFound("stat '" + path + "': no such file (in memory)");
    return static_cast<uint64_t>(it->second.size());
  }

 private:
  // Reads a copy taken at open, as a POSIX reader of a file nobody writes.
  class Reader : public SequentialFile {
   public:
    Reader(std::string data, std::string name, size_t max_read)
        : data_(std::move(data)), name_(std::move(name)), max_read_(max_read) {}
    Status Read(size_t n, char* buf, size_t* got) override {
      *got = std::min({n, max_read_, data_.size() - pos_});
      if (*got > 0) std::memcpy(buf, data_.data() + pos_, *got);
      pos_ += *got;
      return Status::OK();
    }
    const std::string& name() const override { return name_; }

   private:
    std::string data_;
    std::string name_;
    size_t max_read_;
    size_t pos_ = 0;
  };
  class Writer : public WritableFile {
   public:
    Writer(MemEnv* env, std::string name) : env_(env), name_(std::move(name)) {}
    Status Append(std::string_view data) override {
      env_->files_[name_].append(data);
      return Status::OK();
    }
    Status Sync() override { return Status::OK(); }
    Status Truncate(uint64_t size) override {
      env_->files_[name_].resize(size);  // as ftruncate: cut, or extend with zeros
      return Status::OK();
    }
    Status Close() override { return Status::OK(); }
    const std::string& name() const override { return name_; }

   private:
    MemEnv* env_;
    std::string name_;
  };

  std::map<std::string, std::string> files_;
  std::set<std::string> dirs_;
  size_t max_read_ = size_t{1} << 20;
};

}  // namespace tributary::fuzz

#endif  // TRIBUTARY_TESTS_FUZZ_MEM_ENV_H_

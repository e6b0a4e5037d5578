#include "tributary/wal.h"

#include "tributary/checksum.h"

#include <fcntl.h>
#include <unistd.h>

#include <google/protobuf/io/coded_stream.h>
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tributary {

namespace fs = std::filesystem;

namespace {

class PosixWalFile : public WalFile {
 public:
  PosixWalFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixWalFile() override {
    if (fd_ >= 0) ::close(fd_);
  }
  Status Append(const std::string& data) override {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::write(fd_, data.data() + off, data.size() - off);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status::IOError("write-ahead log '" + path_ + "': write: " + std::strerror(errno));
      }
      off += static_cast<size_t>(n);
    }
    return Status::OK();
  }
  Status Sync() override {
    if (::fdatasync(fd_) != 0)
      return Status::IOError("write-ahead log '" + path_ + "': fdatasync: " + std::strerror(errno));
    return Status::OK();
  }
  Status Truncate(uint64_t size) override {
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
      return Status::IOError("write-ahead log '" + path_ + "': ftruncate: " + std::strerror(errno));
    }
    return Status::OK();
  }
  Status Close() override {
    if (fd_ >= 0 && ::close(fd_) != 0) {
      fd_ = -1;
      return Status::IOError("write-ahead log '" + path_ + "': close: " + std::strerror(errno));
    }
    fd_ = -1;
    return Status::OK();
  }

 private:
  int fd_;
  std::string path_;
};

class PosixFactory : public WalFileFactory {
 public:
  Result<std::unique_ptr<WalFile>> Create(const std::string& path) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return Status::IOError("cannot create write-ahead log '" + path + "': " + std::strerror(errno));
    // Make the new file's directory entry durable too.
    int dfd = ::open(fs::path(path).parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
    return std::unique_ptr<WalFile>(new PosixWalFile(fd, path));
  }
};

bool ParseSegmentName(const std::string& name, uint64_t* first) {
  if (name.size() != 4 + 20 + 4 || name.rfind("wal-", 0) != 0 || name.substr(24) != ".log") return false;
  uint64_t v = 0;
  for (size_t i = 4; i < 24; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    v = v * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  *first = v;
  return true;
}

}  // namespace

WalFileFactory* WalFileFactory::Posix() {
  static PosixFactory f;
  return &f;
}

Result<std::unique_ptr<WriteAheadLog>> WriteAheadLog::Open(const std::string& dir, WalFileFactory* files) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IOError("cannot create log directory '" + dir + "': " + ec.message());
  std::unique_ptr<WriteAheadLog> w(new WriteAheadLog());
  w->dir_ = dir;
  w->files_ = files ? files : WalFileFactory::Posix();
  return w;
}

WriteAheadLog::~WriteAheadLog() {
  if (current_) current_->Close();
}

std::string WriteAheadLog::SegmentPath(uint64_t first) const {
  char name[40];
  std::snprintf(name, sizeof(name), "wal-%020" PRIu64 ".log", first);
  return (fs::path(dir_) / name).string();
}

std::vector<std::string> WriteAheadLog::Segments() const {
  std::vector<std::pair<uint64_t, std::string>> segs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    uint64_t first;
    if (ParseSegmentName(e.path().filename().string(), &first)) segs.emplace_back(first, e.path().string());
  }
  std::sort(segs.begin(), segs.end());
  std::vector<std::string> out;
  for (auto& s : segs) out.push_back(s.second);
  return out;
}

namespace {

// Cuts a torn tail off `path`, durably: the segment must read cleanly once a
// newer segment follows it, or the next restart would call it corruption.
Status CutTornTail(const std::string& path, uint64_t valid_bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::IOError("write-ahead log '" + path + "': cannot open to drop a torn tail: " + std::strerror(errno));
  Status st;
  if (::ftruncate(fd, static_cast<off_t>(valid_bytes)) != 0 || ::fdatasync(fd) != 0) {
    st = Status::IOError("write-ahead log '" + path + "': cannot drop a torn tail: " + std::strerror(errno));
  }
  ::close(fd);
  return st;
}

}  // namespace

Status WriteAheadLog::Replay(uint64_t after, const std::function<Status(const v1::WalRecord&)>& fn,
                             WalReplayReport* report) {
  WalReplayReport local;
  if (!report) report = &local;
  auto segs = Segments();
  v1::WalRecord rec;
  for (size_t s = 0; s < segs.size(); ++s) {
    const bool last = s + 1 == segs.size();
    std::ifstream in(segs[s], std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    const std::string data = ss.str();
    size_t off = 0;
    while (off < data.size()) {
      auto damaged = [&](const std::string& why) -> Status {
        if (last) {
          report->torn_bytes += data.size() - off;
          TRIB_RETURN_IF_ERROR(CutTornTail(segs[s], off));
          off = data.size();
          return Status::OK();
        }
        return Status::Corruption("write-ahead log '" + segs[s] + "': " + why + " at byte " + std::to_string(off));
      };
      google::protobuf::io::CodedInputStream cin(reinterpret_cast<const uint8_t*>(data.data() + off),
                                                 static_cast<int>(std::min<size_t>(data.size() - off, 10)));
      uint32_t len = 0;
      if (!cin.ReadVarint32(&len)) {
        TRIB_RETURN_IF_ERROR(damaged("bad record length"));
        break;
      }
      size_t hdr = static_cast<size_t>(cin.CurrentPosition());
      if (off + hdr + len + 4 > data.size()) {
        TRIB_RETURN_IF_ERROR(damaged("incomplete record"));
        break;
      }
      const char* payload = data.data() + off + hdr;
      uint32_t want = 0;
      for (int i = 0; i < 4; ++i)
        want |= static_cast<uint32_t>(static_cast<unsigned char>(payload[len + i])) << (8 * i);
      if (Crc32(payload, len) != want || !rec.ParseFromArray(payload, static_cast<int>(len))) {
        TRIB_RETURN_IF_ERROR(damaged("checksum mismatch"));
        break;
      }
      off += hdr + len + 4;
      report->last_sequence = std::max(report->last_sequence, rec.sequence());
      if (rec.sequence() <= after) {
        report->skipped++;
        continue;
      }
      TRIB_RETURN_IF_ERROR(fn(rec));
      report->records++;
    }
  }
  return Status::OK();
}

Status WriteAheadLog::StartSegment(uint64_t next_sequence) {
  if (current_) {
    TRIB_RETURN_IF_ERROR(Sync());
    TRIB_RETURN_IF_ERROR(current_->Close());
    current_.reset();
  }
  std::string path = SegmentPath(next_sequence);
  // A segment with this name can exist only if it holds no record we keep
  // (all of its records were torn); start it afresh.
  std::error_code ec;
  fs::remove(path, ec);
  auto f = files_->Create(path);
  if (!f.ok()) return f.status();
  current_ = std::move(f).value();
  current_first_ = next_sequence;
  current_bytes_ = 0;
  synced_bytes_ = 0;
  return Status::OK();
}

Status WriteAheadLog::Append(const v1::WalRecord& record) {
  if (!failed_.ok()) return failed_;
  if (!current_) return Status::Internal("write-ahead log: Append before StartSegment");
  std::string payload;
  record.SerializeToString(&payload);
  uint8_t hdr[10];
  uint8_t* end =
      google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(static_cast<uint32_t>(payload.size()), hdr);
  buffer_.append(reinterpret_cast<const char*>(hdr), static_cast<size_t>(end - hdr));
  buffer_ += payload;
  uint32_t crc = Crc32(payload.data(), payload.size());
  for (int i = 0; i < 4; ++i) buffer_.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  return Status::OK();
}

Status WriteAheadLog::Sync() {
  if (!failed_.ok()) return failed_;
  if (!current_) return Status::OK();
  Status st;
  if (!buffer_.empty()) {
    st = current_->Append(buffer_);
    if (st.ok()) current_bytes_ += buffer_.size();
    buffer_.clear();
  }
  if (st.ok()) st = current_->Sync();
  if (st.ok()) {
    synced_bytes_ = current_bytes_;
    return st;
  }
  // Take back what this Sync may have written: those records are refused,
  // never acknowledged, and must not come back on replay.
  Status cut = current_->Truncate(synced_bytes_);
  current_bytes_ = synced_bytes_;
  if (!cut.ok()) {
    st = Status::IOError(st.message() + " (and the unacknowledged tail could not be cut off: " + cut.message() + ")");
  }
  failed_ = st;
  return st;
}

Status WriteAheadLog::DropCovered(uint64_t covered) {
  auto segs = Segments();
  for (size_t i = 0; i + 1 < segs.size(); ++i) {
    uint64_t next_first = 0;
    ParseSegmentName(fs::path(segs[i + 1]).filename().string(), &next_first);
    uint64_t this_first = 0;
    ParseSegmentName(fs::path(segs[i]).filename().string(), &this_first);
    if (this_first == current_first_) break;
    if (next_first == 0 || next_first - 1 > covered) break;
    std::error_code ec;
    fs::remove(segs[i], ec);
    if (ec) return Status::IOError("cannot delete covered log segment '" + segs[i] + "': " + ec.message());
  }
  return Status::OK();
}

Status WriteAheadLog::MaybeRoll(uint64_t next_sequence, uint64_t max_bytes) {
  if (current_ && current_bytes_ + buffer_.size() > max_bytes && next_sequence != current_first_) {
    return StartSegment(next_sequence);
  }
  return Status::OK();
}

}  // namespace tributary

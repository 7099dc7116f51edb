#include "common/files.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/error.hpp"

namespace servesim {
namespace {

std::string human_size(std::uint64_t b) {
  if (b >= (std::uint64_t{1} << 30) && b % (std::uint64_t{1} << 30) == 0) return std::to_string(b >> 30) + " GiB";
  return std::to_string(b >> 20) + " MiB";
}

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";   // "is not a regular file"
}

std::string folder_of(const std::string& path) {
  const std::filesystem::path p(path);
  const auto parent = p.parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

}  // namespace

std::string read_input_file(const std::string& path, std::uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw Error(path, "", std::string("cannot open file: ") + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error(path, "", std::string("cannot open file: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw Error(path, "", std::string("is ") + kind_of(st.st_mode) + "; give a regular file");
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes)
    throw Error(path, "", "file of " + std::to_string(st.st_size) + " bytes exceeds the limit of " + human_size(max_bytes));
  std::string out;
  out.resize(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  for (;;) {
    if (got == out.size()) {
      // The file grew since fstat: read on, within the limit.
      if (out.size() >= max_bytes) {
        char probe;
        const ssize_t n = ::read(fd, &probe, 1);
        if (n > 0) throw Error(path, "", "file exceeds the limit of " + human_size(max_bytes));
        if (n == 0) break;
        if (errno == EINTR) continue;
        throw Error(path, "", std::string("read failed: ") + std::strerror(errno));
      }
      out.resize(std::min<std::uint64_t>(max_bytes, out.size() + 65536));
    }
    const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(path, "", std::string("read failed: ") + std::strerror(errno));
    }
    got += static_cast<std::size_t>(n);
  }
  out.resize(got);
  return out;
}

void check_writable_target(const std::string& path, const std::string& where) {
  namespace fs = std::filesystem;
  const std::string dir = folder_of(path);
  std::error_code ec;
  const auto st = fs::status(dir, ec);
  if (!fs::exists(st)) throw Error(where, "", dir + ": folder does not exist");
  if (!fs::is_directory(st)) throw Error(where, "", dir + ": not a folder");
  if (::access(dir.c_str(), W_OK) != 0) throw Error(where, "", dir + ": folder not writable (" + std::strerror(errno) + ")");
  if (fs::is_directory(fs::status(path, ec))) throw Error(where, "", path + ": is a folder, not a file");
}

AtomicFiles::~AtomicFiles() { discard(); }

void AtomicFiles::discard() {
  for (const auto& p : pending_) ::unlink(p.tmp.c_str());
  pending_.clear();
}

namespace {
// Temporaries are named ".NAME.tmp.PID.XXXXXX" (python/servesim's charts too). One whose process
// is gone (a run killed with SIGKILL, say) and that is over a minute old is removed by the next
// write of the same target, so interrupted runs leave no litter behind for long.
void sweep_stale_temporaries(const std::string& dir, const std::string& name) {
  namespace fs = std::filesystem;
  const std::string prefix = "." + name + ".tmp.";
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    if (f.rfind(prefix, 0) != 0) continue;
    const std::size_t dot = f.find('.', prefix.size());
    if (dot == std::string::npos || dot == prefix.size() || dot - prefix.size() > 9) continue;
    const std::string digits = f.substr(prefix.size(), dot - prefix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;   // alive (or not ours to judge)
    std::error_code e2;
    const auto t = fs::last_write_time(e.path(), e2);
    if (e2 || now - t < std::chrono::seconds(60)) continue;
    fs::remove(e.path(), e2);
  }
}
}  // namespace

std::string AtomicFiles::reserve(const std::string& path) {
  const std::string dir = folder_of(path);
  std::string name = std::filesystem::path(path).filename().string();
  sweep_stale_temporaries(dir, name);
  std::string tmpl = dir + "/." + name + ".tmp." + std::to_string(::getpid()) + ".XXXXXX";
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) throw Error(path, "", std::string("cannot write file: ") + std::strerror(errno));
  ::close(fd);
  pending_.push_back({tmpl, path});
  return tmpl;
}

std::string AtomicFiles::write(const std::string& path, std::string_view content) {
  const std::string tmp = reserve(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) throw Error(path, "", std::string("cannot write file: ") + std::strerror(errno));
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      throw Error(path, "", std::string("write failed: ") + std::strerror(e));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0) throw Error(path, "", std::string("write failed: ") + std::strerror(errno));
  return tmp;
}

void AtomicFiles::commit() {
  // A target that is a folder would make rename fail half-way: check them all first.
  for (const auto& p : pending_) {
    struct stat st {};
    if (::stat(p.target.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      throw Error(p.target, "", "cannot write file: is a folder");
  }
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    const auto& p = pending_[i];
    // mkstemp creates 0600; give the file the usual 0666 & ~umask.
    const mode_t mask = ::umask(0);
    ::umask(mask);
    ::chmod(p.tmp.c_str(), 0666 & ~mask);
    if (::rename(p.tmp.c_str(), p.target.c_str()) != 0) {
      const int e = errno;
      // Undo the renames already done, so the set stays all-or-nothing.
      for (std::size_t k = 0; k < i; ++k) ::unlink(pending_[k].target.c_str());
      throw Error(p.target, "", std::string("cannot write file: ") + std::strerror(e));
    }
  }
  pending_.clear();
}

void write_file_atomic(const std::string& path, std::string_view content) {
  AtomicFiles f;
  f.write(path, content);
  f.commit();
}

}  // namespace servesim

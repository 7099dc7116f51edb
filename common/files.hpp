// Files in and out, with bounds a user can see: inputs must be regular files of a sane size (a
// FIFO, /dev/zero or a directory is refused before anything is read), and outputs are written
// atomically (a temporary file beside the target, then rename), so a failed run never leaves a
// half-written file behind.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace servesim {

// Largest JSON document (scenario, --hw-file, model or HF config) read from disk.
inline constexpr std::uint64_t kMaxJsonFileBytes = std::uint64_t{256} << 20;   // 256 MiB
// Largest trace, length or timestamp file.
inline constexpr std::uint64_t kMaxTraceFileBytes = std::uint64_t{4} << 30;    // 4 GiB

// The whole content of `path`. Throws servesim::Error(path, "", reason) when it cannot be
// opened (with the system's reason), is not a regular file, or is larger than `max_bytes`.
// Opens non-blocking, so a FIFO never hangs.
std::string read_input_file(const std::string& path, std::uint64_t max_bytes);

// Fails with servesim::Error(flag_or_path, ...) unless the folder that would hold `path` exists
// and is writable (checked before a long run, so the run is not wasted).
void check_writable_target(const std::string& path, const std::string& where);

// A set of files written together: each write() goes to a temporary file beside its target;
// commit() renames them all into place; destroying the set without commit() (an error on the
// way) removes the temporaries. Every write is checked.
class AtomicFiles {
 public:
  AtomicFiles() = default;
  AtomicFiles(const AtomicFiles&) = delete;
  AtomicFiles& operator=(const AtomicFiles&) = delete;
  ~AtomicFiles();
  // Returns the temporary file's name (readable until commit()).
  std::string write(const std::string& path, std::string_view content);
  // Registers a temporary that someone else (a child process) writes; returns its name.
  std::string reserve(const std::string& path);
  void commit();
  // Removes the temporaries now (what the destructor does), e.g. before removing their folder.
  void discard();

 private:
  struct Pending {
    std::string tmp, target;
  };
  std::vector<Pending> pending_;
};

// One file, atomically.
void write_file_atomic(const std::string& path, std::string_view content);

}  // namespace servesim

// A standalone driver for the fuzz harnesses, so every build (g++ included, no libFuzzer) fuzzes
// the parsers: it feeds each file of a corpus folder to LLVMFuzzerTestOneInput, then
// deterministic mutations of them (byte flips, truncations, insertions, duplicated and spliced
// JSON fragments, extreme numbers, repeated keys, deep nesting) until a count or a time budget
// runs out. The harness returns normally for any input (servesim::Error is caught there); a crash,
// an abort or another exception fails the run. The input being run is saved to the artifact file
// first thing on a crash (a signal handler writes it), and a mutation is named by its index, so
// `--only INDEX` replays it.
//   fuzz_driver_NAME CORPUS_DIR [--mutations N] [--seconds S] [--seed K] [--artifact FILE] [--only INDEX]
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

// The input being run, for the crash handler (written with async-signal-safe calls only).
const std::string* g_current = nullptr;
char g_artifact[4096] = {0};

extern "C" void on_crash(int sig) {
  if (g_current && g_artifact[0]) {
    const int fd = ::open(g_artifact, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      std::size_t off = 0;
      while (off < g_current->size()) {
        const ssize_t n = ::write(fd, g_current->data() + off, g_current->size() - off);
        if (n <= 0) break;
        off += static_cast<std::size_t>(n);
      }
      ::close(fd);
    }
    static const char msg[] = "fuzz driver: crash; the input is in the artifact file\n";
    (void)!::write(2, msg, sizeof msg - 1);
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

using Rng = std::mt19937_64;

std::size_t pick(Rng& r, std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(r() % n); }

// Byte ranges of JSON fragments: a balanced {...} or [...] or a "string".
std::pair<std::size_t, std::size_t> fragment(const std::string& s, Rng& r) {
  if (s.empty()) return {0, 0};
  for (int tries = 0; tries < 8; ++tries) {
    const std::size_t i = pick(r, s.size());
    const char open = s[i];
    if (open == '"') {
      const std::size_t j = s.find('"', i + 1);
      if (j != std::string::npos) return {i, j + 1};
      continue;
    }
    if (open != '{' && open != '[') continue;
    const char close = open == '{' ? '}' : ']';
    int depth = 0;
    for (std::size_t j = i; j < s.size(); ++j) {
      if (s[j] == open) ++depth;
      if (s[j] == close && --depth == 0) return {i, j + 1};
    }
  }
  const std::size_t a = pick(r, s.size()), b = a + pick(r, std::min<std::size_t>(64, s.size() - a) + 1);
  return {a, b};
}

const char* const kTokens[] = {"0", "-1", "1e308", "-1e308", "1e-300", "4294967296", "9223372036854775808",
                               "99999999999999999999", "NaN", "null", "true", "\"\"", "[]", "{}", "1.5", "-0",
                               "\"nan\"", "\"inf\"", "\xff\xfe", "\\u0000", ",", ":", "\"", "}", "]", "\n"};

std::string mutate(const std::vector<std::string>& corpus, Rng& r) {
  std::string s = corpus[pick(r, corpus.size())];
  const int steps = 1 + static_cast<int>(pick(r, 4));
  for (int k = 0; k < steps; ++k) {
    switch (pick(r, 10)) {
      case 0:   // flip bits of a byte
        if (!s.empty()) s[pick(r, s.size())] ^= static_cast<char>(1u << pick(r, 8));
        break;
      case 1:   // truncate
        s.resize(pick(r, s.size() + 1));
        break;
      case 2: {  // insert random bytes
        std::string ins(1 + pick(r, 8), '\0');
        for (auto& c : ins) c = static_cast<char>(r());
        s.insert(pick(r, s.size() + 1), ins);
        break;
      }
      case 3: {  // duplicate a JSON fragment (a repeated key or element, or a broken one)
        const auto [a, b] = fragment(s, r);
        s.insert(pick(r, s.size() + 1), s.substr(a, b - a));
        break;
      }
      case 4: {  // replace a fragment by a token (extreme number, wrong type, stray syntax)
        const auto [a, b] = fragment(s, r);
        s.replace(a, b - a, kTokens[pick(r, std::size(kTokens))]);
        break;
      }
      case 5: {  // splice: a fragment of another corpus file
        const std::string& o = corpus[pick(r, corpus.size())];
        const auto [a, b] = fragment(o, r);
        s.insert(pick(r, s.size() + 1), o.substr(a, b - a));
        break;
      }
      case 6: {  // deep nesting around a fragment (up to 100,000 levels)
        const auto [a, b] = fragment(s, r);
        const std::size_t n = std::size_t{1} << pick(r, 18);
        const bool obj = r() & 1;
        std::string pre, post;
        for (std::size_t i = 0; i < n; ++i) pre += obj ? "{\"a\":" : "[";
        post.assign(n, obj ? '}' : ']');
        s = s.substr(0, a) + pre + s.substr(a, b - a) + post + s.substr(b);
        break;
      }
      case 7: {  // a number becomes another number
        std::size_t i = pick(r, s.size() + 1);
        while (i < s.size() && !(s[i] >= '0' && s[i] <= '9')) ++i;
        if (i >= s.size()) break;
        std::size_t j = i;
        while (j < s.size() && ((s[j] >= '0' && s[j] <= '9') || s[j] == '.' || s[j] == 'e' || s[j] == '-')) ++j;
        s.replace(i, j - i, kTokens[pick(r, 8)]);
        break;
      }
      case 8: {  // repeat a line (traces, CSVs) or drop one
        const std::size_t a = s.rfind('\n', pick(r, s.size() + 1));
        const std::size_t st = a == std::string::npos ? 0 : a + 1;
        std::size_t e = s.find('\n', st);
        e = e == std::string::npos ? s.size() : e + 1;
        if (r() & 1)
          s.insert(st, s.substr(st, e - st));
        else
          s.erase(st, e - st);
        break;
      }
      default: {  // delete a range
        if (s.empty()) break;
        const std::size_t a = pick(r, s.size());
        s.erase(a, 1 + pick(r, std::min<std::size_t>(32, s.size() - a)));
        break;
      }
    }
  }
  if (s.size() > (1u << 20)) s.resize(1u << 20);
  return s;
}

int run_one(const std::string& input, const std::string& label) {
  g_current = &input;
  try {
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
  } catch (const std::exception& e) {
    std::cerr << "fuzz driver: " << label << ": an exception that is not servesim::Error escaped: " << e.what() << "\n";
    return 1;
  } catch (...) {
    std::cerr << "fuzz driver: " << label << ": an unknown exception escaped\n";
    return 1;
  }
  g_current = nullptr;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, artifact;
  long long mutations = 100000, only = -1;
  double seconds = 4;
  std::uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "fuzz driver: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--mutations") mutations = std::stoll(next());
    else if (a == "--seconds") seconds = std::stod(next());
    else if (a == "--seed") seed = std::stoull(next());
    else if (a == "--artifact") artifact = next();
    else if (a == "--only") only = std::stoll(next());
    else if (!a.empty() && a[0] != '-' && dir.empty()) dir = a;
    else {
      std::cerr << "usage: " << argv[0]
                << " CORPUS_DIR [--mutations N] [--seconds S] [--seed K] [--artifact FILE] [--only INDEX]\n";
      return 2;
    }
  }
  if (dir.empty()) {
    std::cerr << "fuzz driver: give the corpus folder\n";
    return 2;
  }
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.is_regular_file()) files.push_back(e.path());
  if (ec || files.empty()) {
    std::cerr << "fuzz driver: " << dir << ": no corpus files" << (ec ? " (" + ec.message() + ")" : "") << "\n";
    return 2;
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> corpus;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    corpus.push_back(ss.str());
  }
  if (!artifact.empty()) std::snprintf(g_artifact, sizeof g_artifact, "%s", artifact.c_str());
  for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, on_crash);

  if (only < 0)
    for (std::size_t i = 0; i < corpus.size(); ++i)
      if (run_one(corpus[i], files[i].string())) return 1;
  Rng rng(seed);
  const auto start = std::chrono::steady_clock::now();
  long long done = 0;
  for (long long i = 0; i < mutations; ++i) {
    const std::string in = mutate(corpus, rng);   // drawn even when skipped, so indexes replay
    if (only >= 0 && i != only) continue;
    if (run_one(in, "mutation " + std::to_string(i) + " (seed " + std::to_string(seed) + ")")) {
      if (!artifact.empty()) std::ofstream(artifact, std::ios::binary) << in;
      return 1;
    }
    ++done;
    if (only >= 0) break;
    if ((i & 15) == 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds)
      break;
  }
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "fuzz driver: " << corpus.size() << " corpus files and " << done << " mutations (seed " << seed
            << ") in " << t << " s, no finding\n";
  return 0;
}

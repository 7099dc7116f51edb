// servesim: what-if CLI for LLM serving clusters. Errors in the user's input print as one line
// ("servesim: error: <file>: <field>: <reason>") and exit with status 2.
#include <cstdlib>
#include <cmath>
#include <charconv>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <mutex>
#include <exception>
#include <iostream>
#include <new>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/text.hpp"
#include "hwmodels/catalog.hpp"
#include "sim/cli/commands.hpp"

namespace servesim::cli {

void add_format_option(CLI::App& cmd, Format& format) {
  cmd.add_option_function<std::string>(
         "--format", [&format](const std::string& v) { format = text::iequals(v, "json") ? Format::json : Format::table; },
         "Output format: table (default) or json")
      ->check(CLI::IsMember({"table", "json"}, CLI::ignore_case));
}

std::function<void(std::int64_t, std::int64_t)> progress_bar(bool quiet, const std::string& unit) {
  if (quiet || !isatty(2)) return {};
  auto mu = std::make_shared<std::mutex>();
  return [mu, unit](std::int64_t done, std::int64_t total) {
    std::lock_guard<std::mutex> lock(*mu);
    const int width = 30;
    const int filled = total > 0 ? static_cast<int>(width * std::min(done, total) / total) : 0;
    std::cerr << "\r[" << std::string(static_cast<std::size_t>(filled), '#')
              << std::string(static_cast<std::size_t>(width - filled), ' ') << "] " << done << "/" << total << " " << unit
              << (done >= total ? "\n" : "") << std::flush;
  };
}

void add_quiet_flag(CLI::App& cmd, bool& quiet) {
  cmd.add_flag("--quiet,-q", quiet, "No progress bar (it is shown only when stderr is a terminal)");
}

void add_threads_option(CLI::App& cmd, int& threads) {
  // Python's threads= takes the same values (0: all cores); a negative count is refused, not read as 0.
  cmd.add_option("--threads", threads, "Worker threads (default: all cores); results do not depend on it")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            return !s.empty() && s[0] == '-' ? "must be a whole number >= 0 (0: all cores), got " + s : std::string();
          },
          "INT >= 0"));
}

const CLI::Validator& int64_range() {
  static const CLI::Validator v(
      [](std::string& s) -> std::string {
        std::int64_t x = 0;
        const char* b = s.data() + (!s.empty() && s[0] == '+' ? 1 : 0);
        const auto r = std::from_chars(b, s.data() + s.size(), x);
        if (r.ec == std::errc::result_out_of_range)
          return "integer out of range (-9223372036854775808..9223372036854775807), got " + s;
        return "";
      },
      "INT", "int64");
  return v;
}

const CLI::Validator& profile_file() {
  static const CLI::Validator v(
      [](std::string& s) -> std::string {
        try {
          read_input_file(s, kMaxJsonFileBytes);
        } catch (const Error& e) {
          return s + ": " + e.reason() + "; give a profile file (servesim calibrate e2e --output)";
        }
        return "";
      },
      "FILE");
  return v;
}

std::string defaults_line(const nlohmann::json& notes) {
  if (!notes.is_array() || notes.empty()) return "";
  std::string s;
  for (const auto& n : notes) s += (s.empty() ? "" : "; ") + n.get<std::string>();
  return "(defaults: " + s + ")\n";
}

std::string printable(std::string s) {
  for (char& ch : s)
    if ((static_cast<unsigned char>(ch) < 0x20 && ch != '\n' && ch != '\t') || ch == 0x7f) ch = '?';
  return s;
}

std::string memory_hint = "a smaller --requests, sweep or input file needs less";

void emit(Format format, const nlohmann::json& json, const std::string& table_text) {
  // JSON escapes control characters itself (and replaces invalid UTF-8); a table never sends an
  // escape sequence or a bell from a model or file name to the terminal.
  if (format == Format::json)
    std::cout << json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  else
    std::cout << printable(table_text);
  std::cout.flush();
}

}  // namespace servesim::cli

namespace {
// Start-up pays a page fault per 4 KiB of heap it first touches (about 2,100 faults, a third of a
// 64-request run's time on a virtual machine) while it reads and fits the kernel tables. The heap
// grows in 64 MiB steps instead, and the kernel may back it with 2 MiB pages (transparent huge
// pages in "madvise" mode): half the faults. Memory only; no result changes.
void grow_heap_in_large_pages() {
  constexpr std::size_t kPad = std::size_t(64) << 20, kHuge = std::size_t(2) << 20;
  mallopt(M_TOP_PAD, int(kPad));
  mallopt(M_TRIM_THRESHOLD, int(2 * kPad));
  mallopt(M_MMAP_THRESHOLD, int(kPad / 2));   // tables of up to 32 MiB come from this heap too
  const auto lo = reinterpret_cast<std::uintptr_t>(sbrk(0));
  void* volatile first = std::malloc(kHuge);   // one extension now: the request and M_TOP_PAD past it,
  std::free(first);                            // kept after the free (volatile: not elided)
  const auto hi = reinterpret_cast<std::uintptr_t>(sbrk(0));
  const std::uintptr_t start = (lo + kHuge - 1) & ~(kHuge - 1);
  if (hi > start) madvise(reinterpret_cast<void*>(start), hi - start, MADV_HUGEPAGE);   // advice: failure is harmless
}

// CLI11 says "Could not convert: --opt = value"; say also what the option takes.
std::string conversion_message(const CLI::App& sub, const CLI::ParseError& e) {
  const std::string what = e.what();
  const std::string head = "Could not convert: ";
  const auto eq = what.find(" = ");
  if (what.rfind(head, 0) != 0 || eq == std::string::npos) return what;
  const std::string name = what.substr(head.size(), eq - head.size());
  const CLI::Option* opt = sub.get_option_no_throw(name);
  if (!opt) return what;
  const std::string type = opt->get_type_name();
  const std::string wants = type.find("FLOAT") != std::string::npos ? "a number"
                            : type.find("INT") != std::string::npos ? "a whole number"
                                                                     : type;
  return name + " = " + what.substr(eq + 3) + ": expects " + wants;
}
}  // namespace

namespace servesim::cli {
namespace {

// --help names each option's value plainly: INT, FLOAT, FILE, DIR, PATH or the choices ({table,json}).
// CLI11 appends each check's own label to the type ("--seed INT:INT", "--target-tps FLOAT:NUMBER",
// "--tp INT:INT in [1 - 1048576]"), which reads as two values or a range to type; the checks still
// run and say what is valid when a value is refused.
std::string plain_type(const std::string& t) {
  const auto colon = t.find(':');
  if (colon == std::string::npos) return t;
  const std::string base = t.substr(0, colon), rest = t.substr(colon + 1);
  if (base != "TEXT") return base;   // INT, FLOAT, UINT: the range is the check's to say
  if (!rest.empty() && rest.front() == '{') return rest.substr(0, rest.find('}') + 1);
  const std::string word = rest.substr(0, rest.find(' '));
  return word == "FILE" || word == "DIR" || word == "PATH" ? word : base;
}

class PlainFormatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override {
    if (!opt->get_option_text().empty() || opt->get_type_size() == 0 || opt->get_type_name().empty() ||
        !opt->get_envname().empty() || !opt->get_needs().empty() || !opt->get_excludes().empty())
      return CLI::Formatter::make_option_opts(opt);
    std::string out = " " + plain_type(opt->get_type_name());
    if (!opt->get_default_str().empty()) out += "=" + opt->get_default_str();
    if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) out += " ...";
    else if (opt->get_expected_min() > 1) out += " x " + std::to_string(opt->get_expected());
    if (opt->get_required()) out += " REQUIRED";
    return out;
  }
};

}  // namespace
}  // namespace servesim::cli

int main(int argc, char** argv) {
  grow_heap_in_large_pages();
  using namespace servesim;
  CLI::App app{"servesim: simulate LLM serving clusters and plan GPU capacity against latency SLOs"};
  app.formatter(std::make_shared<cli::PlainFormatter>());   // before the subcommands, which inherit it
  app.require_subcommand(1);
  app.set_version_flag("--version", "servesim 0.1.0");
  std::vector<std::string> hw_files;
  app.add_option("--hw-file", hw_files, "Extra GPU/instance catalogue JSON (repeatable; before or after the subcommand)")
      ->check(CLI::ExistingFile);
  std::vector<std::string> prices;
  app.add_option("--price", prices,
                 "INSTANCE=USD_PER_HOUR: that instance's $/hour in plan, search and recommend (repeatable; before or after "
                 "the subcommand; after --hw-file entries)");
  app.fallthrough();   // --hw-file and --price may follow the subcommand too
  app.parse_complete_callback([&] {
    for (const auto& f : hw_files) hw::Catalog::global().add_file(f);
    std::vector<std::string> priced;   // catalogue names, so that two spellings of one instance are one
    for (const auto& p : prices) {
      const auto eq = p.find('=');
      if (eq == std::string::npos || eq == 0)
        throw Error("--price", "", "expected INSTANCE=USD_PER_HOUR (e.g. p5en.48xlarge=84.8), got '" + p + "'");
      const std::string usd = p.substr(eq + 1);
      char* end = nullptr;
      const double v = std::strtod(usd.c_str(), &end);
      // Prices print in cents and the catalogue holds at most $10^6 an hour (hw-file usd_per_hour).
      if (usd.empty() || !end || *end || !std::isfinite(v) || !(v >= 0.01 && v <= 1e6))
        throw Error("--price", p.substr(0, eq), "expected a price in USD per hour from 0.01 to 1000000, got '" + usd + "'");
      hw::Catalog::global().set_price(p.substr(0, eq), v, "--price on the command line");   // refuses an unknown instance
      const std::string name = hw::Catalog::global().instance(p.substr(0, eq)).name;
      if (std::find(priced.begin(), priced.end(), name) != priced.end())   // which of two prices applies would be a guess
        throw Error("--price", name, "given twice; keep one");
      priced.push_back(name);
    }
  });

  cli::add_list_command(app);
  cli::add_memory_commands(app);
  cli::add_op_commands(app);
  cli::add_calibrate_commands(app);
  cli::add_step_command(app);
  cli::add_simulate_commands(app);
  cli::add_plan_command(app);
  cli::add_validate_command(app);
  cli::add_search_command(app);
  cli::add_nccl_command(app);
  cli::add_recommend_command(app);
  cli::add_planner_command(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Name the (sub)command that failed so the hint points at the right --help.
    std::string cmd = "servesim";
    const CLI::App* sub = &app;
    while (!sub->get_subcommands().empty()) {
      sub = sub->get_subcommands().front();
      cmd += " " + sub->get_name();
    }
    std::string msg = conversion_message(*sub, e);
    if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
      // CLI11 lists the words it could not place last first ("not expected: 1 --threads"): give them
      // in the order typed, and say they are not this subcommand's.
      std::string words;
      for (const auto& w : app.remaining(true)) words += (words.empty() ? "" : " ") + w;
      if (!words.empty()) msg = words + ": not an option or argument of " + cmd;
    }
    std::cerr << "servesim: error: " << cli::printable(msg) << " (see " << cmd << " --help)\n";
    return 2;
  } catch (const servesim::Error& e) {
    std::cerr << "servesim: error: " << cli::printable(e.what()) << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "servesim: error: out of memory (" << cli::memory_hint << ")\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "servesim: error: " << cli::printable(e.what()) << "\n";
    return 1;
  }
  return 0;
}

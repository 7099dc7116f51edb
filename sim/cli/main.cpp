// servesim: what-if CLI for LLM serving clusters. Errors in the user's input print as one line
// ("servesim: error: <file>: <field>: <reason>") and exit with status 2.
#include <cstdio>
#include <exception>
#include <iostream>

#include "common/error.hpp"
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

void emit(Format format, const nlohmann::json& json, const std::string& table_text) {
  if (format == Format::json)
    std::cout << json.dump(2) << "\n";
  else
    std::cout << table_text;
  std::cout.flush();
}

}  // namespace servesim::cli

int main(int argc, char** argv) {
  using namespace servesim;
  CLI::App app{"servesim: simulate LLM serving clusters and plan GPU capacity against latency SLOs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "servesim 0.1.0");
  std::vector<std::string> hw_files;
  app.add_option("--hw-file", hw_files, "Extra GPU/instance catalogue JSON (repeatable)")
      ->check(CLI::ExistingFile);
  app.parse_complete_callback([&] {
    for (const auto& f : hw_files) hw::Catalog::global().add_file(f);
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
    for (const CLI::App* a = &app; a;) {
      const auto subs = a->get_subcommands();
      if (subs.empty()) break;
      a = subs.front();
      cmd += " " + a->get_name();
    }
    std::cerr << "servesim: error: " << e.what() << " (see " << cmd << " --help)\n";
    return 2;
  } catch (const servesim::Error& e) {
    std::cerr << "servesim: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "servesim: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

// The one exception type for bad input: carries the file (or "--flag"), the field and the
// reason, and prints as one line. Raised at the edges (files, CLI, Python), never aborts.
#pragma once
#include <stdexcept>
#include <string>

namespace servesim {

class Error : public std::runtime_error {
 public:
  // `where` is a file name, a CLI flag or an API argument; `field` may be empty.
  Error(std::string where, std::string field, std::string reason);
  const std::string& where() const { return where_; }
  const std::string& field() const { return field_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string where_, field_, reason_;
};

}  // namespace servesim

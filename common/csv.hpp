// CSV reading shared by every reader of user CSV files (validate's silicon samples, the planner's
// load profiles): RFC 4180 records and plain decimal numbers.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace servesim::text {

// CSV records (RFC 4180): fields split at commas, "a,b", "" and line breaks inside quotes; lines
// end in LF, CRLF or CR alone (old Mac and some Excel exports); a UTF-8 byte-order mark is skipped.
// Every field must be valid UTF-8 (it reaches JSON output and terminals).
class CsvRecords {
 public:
  CsvRecords(std::string text, std::string file);
  // The next record (false at the end); `line` is the line it starts on. Blank lines are skipped.
  bool next(std::vector<std::string>& out, int& line);

 private:
  std::string t_, file_;
  std::size_t pos_ = 0;
  int line_ = 1;
};

// A decimal number as the CSV writes it: digits, one '.', an exponent; never hexadecimal, "inf",
// "nan" or surrounding spaces (strtod would take them all).
bool decimal(const std::string& s);

}  // namespace servesim::text

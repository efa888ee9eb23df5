// Goldens: made from records, written, parsed and compared (golden.h).

#include "harness/golden/golden.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "harness/common/environment.h"
#include "harness/common/error.h"
#include "harness/common/input_file.h"
#include "harness/common/utf8.h"
#include "harness/record/record.h"

namespace mtp::golden {
namespace {

constexpr const char* kMagic = "mtp-harness-goldens 2";
constexpr const char* kMagicV1 = "mtp-harness-goldens 1";

/// Lines of `text` (a final newline ends the last line rather than starting an empty one).
std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

/// The value of scalar float loss `name` at `step` of `r`.
double loss_value(const record::RecordReader& r, int step, const std::string& name) {
  const record::TensorData t = r.read(step, record::Group::kLoss, name);
  if (t.numel() == 1 && t.dtype == record::DType::kF32) {
    float v;
    std::memcpy(&v, t.bytes.data(), 4);
    return v;
  }
  if (t.numel() == 1 && t.dtype == record::DType::kF64) {
    double v;
    std::memcpy(&v, t.bytes.data(), 8);
    return v;
  }
  throw record::RecordError(
      fmt::format("{}: step {} loss/{} is not a float32 or float64 scalar", r.path(), step, name));
}

/// The golden form of a tensor digest: the high half of its XXH3-128, 16 hex digits.
std::string short_digest(const record::Digest128& d) { return d.hex().substr(0, 16); }

bool is_hex16(const std::string& s) {
  return s.size() == 16 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

std::string attr_text(const record::AttrValue& v) {
  return std::visit([](const auto& x) { return fmt::format("{}", x); }, v);
}

std::map<std::string, std::string> record_fingerprint(const record::AttrMap& attrs) {
  std::map<std::string, std::string> out;
  for (const std::string& key : fingerprint_keys()) {
    const auto it = attrs.find(key);
    out[key] = it == attrs.end() ? "(absent)" : attr_text(it->second);
  }
  return out;
}

std::vector<std::string>* find_names(GoldenFile& g, const std::string& group) {
  for (auto& [name, list] : g.names) {
    if (name == group) return &list;
  }
  return nullptr;
}

}  // namespace

const std::vector<std::string>& GoldenFile::names_of(const std::string& group) const {
  static const std::vector<std::string> kNone;
  for (const auto& [name, list] : names) {
    if (name == group) return list;
  }
  return kNone;
}

std::string GoldenFile::digest(const std::string& variant, int step, const std::string& group,
                               const std::string& name) const {
  const auto& list = names_of(group);
  const auto at = std::find(list.begin(), list.end(), name);
  if (at == list.end()) return "";
  const size_t i = static_cast<size_t>(at - list.begin());
  for (const DigestRow& r : rows) {
    if (r.variant == variant && r.step == step && r.group == group) {
      return i < r.digests.size() ? r.digests[i] : "";
    }
  }
  return "";
}

std::string scenario_text_digest(const std::string& text) {
  return record::digest_bytes(text.data(), text.size(), 1).whole.hex();
}

GoldenFile golden_from_records(const std::string& scenario, const std::string& scenario_text,
                               const std::vector<std::pair<std::string, std::string>>& records) {
  GoldenFile g;
  g.scenario = scenario;
  g.scenario_digest = scenario_text_digest(scenario_text);
  g.scenario_text = scenario_text;
  // Names per group, in canonical group order, each group's names in first-seen order.
  std::map<std::string, std::vector<std::string>> names;
  std::map<std::string, std::set<std::string>> seen;
  std::vector<std::pair<std::string, std::unique_ptr<record::RecordReader>>> readers;
  for (const auto& [variant, path] : records) {
    auto r = std::make_unique<record::RecordReader>(path);
    if (const auto nf = r->first_nonfinite()) {
      throw InputError(
          fmt::format("{}: holds a non-finite value ({}); goldens are made and "
                      "checked only from finite runs",
                      path, nf->describe()));
    }
    const auto fp = record_fingerprint(r->attrs());
    if (g.fingerprint.empty()) {
      g.fingerprint = fp;
    } else if (fp != g.fingerprint) {
      for (const auto& [k, v] : fp) {
        if (g.fingerprint[k] != v) {
          throw InputError(
              fmt::format("{}: fingerprint {} is \"{}\", but the scenario's first "
                          "record has \"{}\": goldens are made from one environment",
                          path, k, v, g.fingerprint[k]));
        }
      }
    }
    for (int step : r->steps()) {
      for (const auto& group : r->groups(step)) {
        for (const auto& name : r->names(step, group)) {
          if (seen[group].insert(name).second) names[group].push_back(name);
        }
      }
    }
    readers.emplace_back(variant, std::move(r));
  }
  for (const auto& group : record::record_groups()) {
    if (names.count(group)) g.names.emplace_back(group, names[group]);
  }
  for (const auto& [variant, r] : readers) {
    for (int step : r->steps()) {
      for (const auto& [group, list] : g.names) {
        const auto groups = r->groups(step);
        if (std::find(groups.begin(), groups.end(), group) == groups.end()) continue;
        const auto present = r->names(step, group);
        const std::set<std::string> here(present.begin(), present.end());
        DigestRow row{variant, step, group, {}};
        for (const auto& name : list) {
          if (!here.count(name)) {
            row.digests.emplace_back();
            continue;
          }
          const record::TensorInfo& info = r->verified_info(step, group, name);
          if (!info.digest) {
            throw record::RecordError(fmt::format(
                "{}: step {} {}/{} has no digest (a record of schema version 1); goldens are "
                "made from records of this build",
                r->path(), step, group, name));
          }
          row.digests.push_back(short_digest(*info.digest));
        }
        g.rows.push_back(std::move(row));
      }
      if (!r->has_group(step, record::Group::kLoss)) continue;
      LossRow losses{variant, step, {}};
      for (const auto& name : r->names(step, record::Group::kLoss)) {
        losses.values.emplace_back(name, loss_value(*r, step, name));
      }
      g.losses.push_back(std::move(losses));
    }
  }
  return g;
}

std::string format_golden(const GoldenFile& g) {
  std::string out = fmt::format(
      "{}\n# Digests of every tensor of every step of every variant of scenario \"{}\": the high\n"
      "# half of each tensor's XXH3-128 (harness/record/digest.h). Generated by `mtp-harness\n"
      "# golden update`; checked by `mtp-harness golden check` (harness/golden/golden.h). Do not\n"
      "# edit by hand.\nscenario {}\nscenario_xxh3_128 {}\n",
      kMagic, g.scenario, g.scenario, g.scenario_digest);
  const std::vector<std::string> text = split_lines(g.scenario_text);
  out += fmt::format("scenario_text {}\n", text.size());
  for (const auto& line : text) out += line.empty() ? "|\n" : "| " + line + "\n";
  for (const auto& [k, v] : g.fingerprint) out += fmt::format("fingerprint {} {}\n", k, v);
  for (const auto& [group, list] : g.names) {
    out += fmt::format("names {} {}\n", group, list.size());
    for (const auto& n : list) out += "  " + n + "\n";
  }
  for (const DigestRow& r : g.rows) {
    out += fmt::format("digests {} {} {}", r.variant, r.step, r.group);
    for (const auto& d : r.digests) out += " " + (d.empty() ? std::string("-") : d);
    out += "\n";
  }
  for (const LossRow& r : g.losses) {
    out += fmt::format("losses {} {}", r.variant, r.step);
    for (const auto& [name, v] : r.values) out += fmt::format(" {}={}", name, v);
    out += "\n";
  }
  return out;
}

namespace {

/// The words of `line` (split at spaces and tabs).
std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

/// `word` as a decimal integer in [0, max] (digits only: no sign, no junk), else nullopt.
std::optional<int64_t> count_of(const std::string& word, int64_t max) {
  int64_t v = -1;
  const char* end = word.data() + word.size();
  if (word.empty() || word[0] < '0' || word[0] > '9') return std::nullopt;
  const auto [at, ec] = std::from_chars(word.data(), end, v);
  if (ec != std::errc() || at != end || v > max) return std::nullopt;
  return v;
}

bool is_hex(const std::string& s, size_t digits) {
  return s.size() == digits && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

GoldenFile parse_golden(const std::string& text, const std::string& source) {
  GoldenFile g;
  g.source = source;
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  auto fail = [&](const std::string& what) {
    throw InputError(fmt::format("{}:{}: {}", source, lineno, what));
  };
  std::vector<std::string>* pending = nullptr;  // names still to read
  size_t pending_count = 0;
  std::map<std::string, int> pending_seen;  // the names read so far → their lines
  std::string pending_group;
  size_t text_lines = 0;  // scenario text lines still to read
  int version = 0, text_line = 0, digest_line = 0;
  // Where each key was first given, so that a second copy names both lines: a copy that differs
  // from the first would let one of the two pass unseen.
  std::map<std::tuple<std::string, int, std::string>, int> rows_seen;
  std::map<std::pair<std::string, int>, int> losses_seen;
  std::map<std::string, int> fingerprint_seen, names_seen;
  auto twice = [&](const std::string& what, int first) {
    fail(fmt::format("{} given twice (first on line {})", what, first));
  };
  auto expect_words = [&](const std::vector<std::string>& w, size_t n, const char* form) {
    if (w.size() != n) {
      fail(fmt::format("expected \"{}\"{}", form,
                       w.size() > n
                           ? fmt::format(", then nothing (\"{}\" follows)", printable(w[n]))
                           : std::string()));
    }
  };
  while (std::getline(in, line)) {
    ++lineno;
    // A carriage return: CRLF line ends (the first line shows it). Scenario text and tensor
    // name lines hold what the records held, byte for byte, and are exempt.
    auto no_cr = [&] {
      if (const size_t cr = line.find('\r'); cr != std::string::npos) {
        fail(
            fmt::format("a carriage return (\\r) at column {}{}: goldens are text with \\n line "
                        "ends, as `mtp-harness golden update` writes them",
                        cr + 1, cr + 1 == line.size() ? " (CRLF line ends?)" : ""));
      }
    };
    if (version == 0) {
      no_cr();
      if (line != kMagic && line != kMagicV1) {
        fail(fmt::format("not a goldens file (the first line must be \"{}\")", kMagic));
      }
      version = line == kMagic ? 2 : 1;
      continue;
    }
    if (text_lines > 0) {
      if (line == "|") {
        g.scenario_text += "\n";
      } else if (line.compare(0, 2, "| ") == 0) {
        g.scenario_text += line.substr(2) + "\n";
      } else {
        fail(fmt::format("expected a scenario text line (\"| <text>\" or \"|\"), {} still to read",
                         text_lines));
      }
      --text_lines;
      continue;
    }
    if (pending != nullptr && pending->size() < pending_count) {
      if (line.size() < 3 || line.compare(0, 2, "  ") != 0 || line[2] == ' ') {
        fail(fmt::format("expected a tensor name (\"  <name>\"), {} of {} read", pending->size(),
                         pending_count));
      }
      const std::string name = line.substr(2);
      if (const auto [it, fresh] = pending_seen.emplace(name, lineno); !fresh) {
        twice(fmt::format("tensor \"{}\" of group {}", printable(name), pending_group), it->second);
      }
      pending->push_back(name);
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    no_cr();
    const std::vector<std::string> w = words_of(line);
    if (w.empty()) fail("a line of only blanks");
    const std::string& kind = w[0];
    if ((kind == "scenario_text" || kind == "losses") && version == 1) {
      fail(
          fmt::format("\"{}\" lines are of format 2, but the file's first line says format 1 "
                      "(\"{}\")",
                      kind, kMagicV1));
    }
    if (kind == "scenario") {
      expect_words(w, 2, "scenario <name>");
      if (g.scenario_line > 0) twice("scenario", g.scenario_line);
      g.scenario = w[1];
      g.scenario_line = lineno;
    } else if (kind == "scenario_xxh3_128") {
      expect_words(w, 2, "scenario_xxh3_128 <32 lower-case hex digits>");
      if (digest_line > 0) twice("scenario_xxh3_128", digest_line);
      if (!is_hex(w[1], 32)) {
        fail(fmt::format("scenario_xxh3_128 \"{}\" is not 32 lower-case hex digits",
                         printable(w[1])));
      }
      g.scenario_digest = w[1];
      digest_line = lineno;
    } else if (kind == "scenario_text") {
      expect_words(w, 2, "scenario_text <line count>");
      const auto count = count_of(w[1], 1000000);
      if (!count) fail("expected \"scenario_text <line count>\" (a count of at most 1000000)");
      if (text_line > 0) twice("scenario_text", text_line);
      text_line = lineno;
      text_lines = static_cast<size_t>(*count);
    } else if (kind == "fingerprint") {
      std::string first, key, value;
      std::istringstream words(line);
      words >> first >> key;
      std::getline(words, value);
      if (key.empty()) fail("fingerprint needs a key");
      if (const auto [it, fresh] = fingerprint_seen.emplace(key, lineno); !fresh) {
        twice(fmt::format("fingerprint {}", printable(key)), it->second);
      }
      g.fingerprint[key] = value.empty() ? "" : value.substr(1);
    } else if (kind == "names") {
      expect_words(w, 3, "names <group> <count>");
      const std::string& group = w[1];
      const auto count = count_of(w[2], 10000000);
      if (!count) fail("expected \"names <group> <count>\" (a count of at most 10000000)");
      const auto& groups = record::record_groups();
      if (std::find(groups.begin(), groups.end(), group) == groups.end()) {
        fail(fmt::format("names of group \"{}\", which is not a record group ({})",
                         printable(group), fmt::join(groups, ", ")));
      }
      if (const auto [it, fresh] = names_seen.emplace(group, lineno); !fresh) {
        twice(fmt::format("names of group {}", group), it->second);
      }
      g.names.emplace_back(group, std::vector<std::string>{});
      pending = &g.names.back().second;
      pending_count = static_cast<size_t>(*count);
      pending_group = group;
      pending_seen.clear();
    } else if (kind == "digests") {
      const auto step = w.size() >= 4 ? count_of(w[2], 999999) : std::nullopt;
      if (!step) fail("expected \"digests <variant> <step> <group> <digest>...\"");
      DigestRow r{w[1], static_cast<int>(*step), w[3], {}};
      if (const auto [it, fresh] =
              rows_seen.emplace(std::tuple{r.variant, r.step, r.group}, lineno);
          !fresh) {
        twice(fmt::format("digests of variant {} step {} group {}", printable(r.variant), r.step,
                          r.group),
              it->second);
      }
      const std::vector<std::string>* list = find_names(g, r.group);
      if (list == nullptr) {
        fail(fmt::format("digests of group {} before its names", printable(r.group)));
      }
      for (size_t k = 4; k < w.size(); ++k) {
        if (w[k] == "-") {
          r.digests.emplace_back();
        } else if (is_hex16(w[k])) {
          r.digests.push_back(w[k]);
        } else {
          fail(fmt::format("digest \"{}\" is not 16 lower-case hex digits or \"-\"",
                           printable(w[k])));
        }
      }
      if (r.digests.size() != list->size()) {
        fail(fmt::format("{} digests for the {} names of group {}", r.digests.size(), list->size(),
                         r.group));
      }
      g.rows.push_back(std::move(r));
    } else if (kind == "losses") {
      const auto step = w.size() >= 3 ? count_of(w[2], 999999) : std::nullopt;
      if (!step) fail("expected \"losses <variant> <step> <name>=<value>...\"");
      LossRow r{w[1], static_cast<int>(*step), {}};
      if (const auto [it, fresh] = losses_seen.emplace(std::pair{r.variant, r.step}, lineno);
          !fresh) {
        twice(fmt::format("losses of variant {} step {}", printable(r.variant), r.step),
              it->second);
      }
      std::set<std::string> names;
      for (size_t k = 3; k < w.size(); ++k) {
        const std::string& item = w[k];
        const size_t eq = item.find('=');
        double v = 0.0;
        const char* end = item.data() + item.size();
        const auto [at, ec] = eq == std::string::npos || eq == 0
                                  ? std::from_chars_result{item.data(), std::errc::invalid_argument}
                                  : std::from_chars(item.data() + eq + 1, end, v);
        if (ec != std::errc() || at != end) {
          fail(fmt::format("loss \"{}\" is not <name>=<number>", printable(item)));
        }
        if (!std::isfinite(v)) {
          fail(fmt::format("loss \"{}\" is not finite: goldens are made only from finite runs",
                           printable(item)));
        }
        if (!names.insert(item.substr(0, eq)).second) {
          fail(fmt::format("loss {} given twice in the line", printable(item.substr(0, eq))));
        }
        r.values.emplace_back(item.substr(0, eq), v);
      }
      // A record's loss group is lm, mtp_1 .. mtp_D and total (step_recorder.cc): a row with
      // any other set was edited or cut short.
      std::set<std::string> expected;
      if (names.size() >= 2) {
        for (auto& n : record::loss_names(static_cast<int64_t>(names.size()) - 2)) {
          expected.insert(std::move(n));
        }
      } else {
        expected = {record::kLmLossName, record::kTotalLossName};
      }
      if (names != expected) {
        fail(fmt::format(
            "the losses of variant {} step {} are {{{}}}: a row holds lm, mtp_1 .. "
            "mtp_D and total (a truncated or edited line?)",
            printable(r.variant), r.step, printable(fmt::format("{}", fmt::join(names, ", ")))));
      }
      g.losses.push_back(std::move(r));
    } else {
      fail(fmt::format("unknown line kind \"{}\"", printable(kind)));
    }
  }
  if (version == 0) fail("empty file");
  if (pending != nullptr && pending->size() < pending_count) {
    fail(fmt::format("the file ends after {} of {} names", pending->size(), pending_count));
  }
  if (text_lines > 0)
    fail(fmt::format("the file ends with {} scenario text lines to read", text_lines));
  if (g.scenario.empty()) fail("no \"scenario\" line");
  if (version == 2 && (digest_line == 0 || text_line == 0)) {
    fail(fmt::format("no \"{}\" line (format 2 files have the scenario text and its digest)",
                     digest_line == 0 ? "scenario_xxh3_128" : "scenario_text"));
  }
  if (text_line > 0) {
    // The text must be the one its digest names. format_golden writes a text without a final
    // newline as if it had one: either form may match.
    std::string without = g.scenario_text;
    if (!without.empty()) without.pop_back();
    if (scenario_text_digest(without) == g.scenario_digest) {
      g.scenario_text = without;
    } else if (scenario_text_digest(g.scenario_text) != g.scenario_digest) {
      lineno = text_line;
      fail(
          fmt::format("the scenario text (this line and the next {}) has digest {}, but "
                      "scenario_xxh3_128 (line {}) says {}: the text or the digest was edited",
                      std::count(g.scenario_text.begin(), g.scenario_text.end(), '\n'),
                      scenario_text_digest(g.scenario_text), digest_line, g.scenario_digest));
    }
  }
  return g;
}

GoldenFile read_golden_file(const std::string& path, const std::string& expected_scenario) {
  const std::vector<uint8_t> bytes = read_input_file(path, "goldens", kMaxSmallInputBytes);
  GoldenFile g = parse_golden(std::string(bytes.begin(), bytes.end()), path);
  if (!expected_scenario.empty()) check_scenario(g, expected_scenario);
  return g;
}

void check_scenario(const GoldenFile& g, const std::string& scenario) {
  if (g.scenario != scenario) {
    throw InputError(
        fmt::format("{}:{}: the goldens are of scenario \"{}\", not of scenario \"{}\" "
                    "that is being checked",
                    g.source, g.scenario_line, printable(g.scenario), printable(scenario)));
  }
}

std::string TensorChange::describe() const {
  return fmt::format("variant {} step {} {}/{}: golden {} now {}", variant, step, group, name,
                     golden.empty() ? "absent" : golden, now.empty() ? "absent" : now);
}

std::string LossChange::describe() const {
  const auto text = [](const std::optional<double>& v) {
    return v ? fmt::format("{:.9g}", *v) : std::string("absent");
  };
  std::string s = fmt::format("{} {} → {}", name, text(golden), text(now));  // 9 digits: a float
  if (golden && now && std::isfinite(*golden) && std::isfinite(*now)) {
    const double d = *now - *golden;
    s += fmt::format(" (Δ {:+.3g}", d);
    if (*golden != 0.0) s += fmt::format(", {:.3g} relative", std::fabs(d / *golden));
    s += ")";
  }
  return s;
}

std::vector<std::string> line_diff(const std::string& a, const std::string& b) {
  const std::vector<std::string> x = split_lines(a), y = split_lines(b);
  std::vector<std::string> out;
  const size_t n = x.size(), m = y.size();
  if (n > 5000 || m > 5000) {
    for (size_t i = 0; i < std::max(n, m); ++i) {
      if (i < n && i < m && x[i] == y[i]) continue;
      if (i < n) out.push_back("- " + x[i]);
      if (i < m) out.push_back("+ " + y[i]);
    }
    return out;
  }
  // lcs[i][j]: the longest common subsequence of x[i..] and y[j..].
  std::vector<std::vector<uint32_t>> lcs(n + 1, std::vector<uint32_t>(m + 1, 0));
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m; j-- > 0;) {
      lcs[i][j] = x[i] == y[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && x[i] == y[j]) {
      ++i;
      ++j;
    } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
      out.push_back("- " + x[i++]);  // a removed line before the line that replaces it
    } else {
      out.push_back("+ " + y[j++]);
    }
  }
  return out;
}

GoldenDiff diff_goldens(const GoldenFile& golden, const GoldenFile& now) {
  if (!golden.scenario.empty() && !now.scenario.empty()) check_scenario(golden, now.scenario);
  GoldenDiff d;
  std::set<std::string> keys;
  for (const auto& [k, v] : golden.fingerprint) keys.insert(k);
  for (const auto& [k, v] : now.fingerprint) keys.insert(k);
  for (const std::string& k : keys) {
    const auto a = golden.fingerprint.find(k), b = now.fingerprint.find(k);
    const std::string va = a == golden.fingerprint.end() ? "(absent)" : a->second;
    const std::string vb = b == now.fingerprint.end() ? "(absent)" : b->second;
    if (va == vb) continue;
    (fingerprint_key_changes_bits(k) ? d.fingerprint_bits : d.fingerprint_info)
        .push_back(fmt::format("{}: \"{}\" (goldens) vs \"{}\" (now)", k, va, vb));
  }
  d.scenario_changed = golden.scenario_digest != now.scenario_digest;
  if (d.scenario_changed && !golden.scenario_text.empty() && !now.scenario_text.empty()) {
    d.scenario_text_diff = line_diff(golden.scenario_text, now.scenario_text);
  }
  if (!golden.losses.empty()) {
    std::map<std::pair<std::string, int>, const LossRow*> now_rows;
    for (const LossRow& r : now.losses) now_rows[{r.variant, r.step}] = &r;
    std::set<std::pair<std::string, int>> golden_keys;
    auto value = [](const LossRow* r, const std::string& name) -> std::optional<double> {
      if (r == nullptr) return std::nullopt;
      for (const auto& [n, v] : r->values) {
        if (n == name) return v;
      }
      return std::nullopt;
    };
    auto same = [](const std::optional<double>& a, const std::optional<double>& b) {
      if (!a || !b) return !a && !b;
      return std::memcmp(&*a, &*b, sizeof(double)) == 0;  // bits: NaN equals its own bits
    };
    for (const LossRow& r : golden.losses) {
      golden_keys.insert({r.variant, r.step});
      const auto it = now_rows.find({r.variant, r.step});
      const LossRow* other = it == now_rows.end() ? nullptr : it->second;
      std::set<std::string> names;
      for (const auto& [n, v] : r.values) {
        names.insert(n);
        if (!same(v, value(other, n)))
          d.loss_changes.push_back({r.variant, r.step, n, v, value(other, n)});
      }
      for (const auto& [n, v] : other ? other->values : decltype(r.values){}) {
        if (!names.count(n)) d.loss_changes.push_back({r.variant, r.step, n, std::nullopt, v});
      }
    }
    for (const LossRow& r : now.losses) {
      if (golden_keys.count({r.variant, r.step})) continue;
      for (const auto& [n, v] : r.values)
        d.loss_changes.push_back({r.variant, r.step, n, std::nullopt, v});
    }
  }
  // Every (variant, step, group) row of either file, the golden file's order first.
  using Key = std::tuple<std::string, int, std::string>;
  std::vector<Key> order;
  std::map<Key, const DigestRow*> rows_golden, rows_now;
  for (const auto* g : {&golden, &now}) {
    auto& index = g == &golden ? rows_golden : rows_now;
    for (const DigestRow& r : g->rows) {
      const Key key{r.variant, r.step, r.group};
      if (!rows_golden.count(key) && !rows_now.count(key)) order.push_back(key);
      index[key] = &r;
    }
  }
  // Position of every name in its group's table, per file.
  using Positions = std::map<std::string, std::unordered_map<std::string, size_t>>;
  auto positions = [](const GoldenFile& g) {
    Positions p;
    for (const auto& [group, list] : g.names) {
      for (size_t i = 0; i < list.size(); ++i) p[group][list[i]] = i;
    }
    return p;
  };
  const Positions pos_golden = positions(golden), pos_now = positions(now);
  auto digest_of = [](const std::map<Key, const DigestRow*>& index, const Positions& pos,
                      const Key& key, const std::string& name) -> std::string {
    const auto row = index.find(key);
    if (row == index.end()) return "";
    const auto group = pos.find(std::get<2>(key));
    if (group == pos.end()) return "";
    const auto at = group->second.find(name);
    if (at == group->second.end()) return "";
    return at->second < row->second->digests.size() ? row->second->digests[at->second] : "";
  };
  std::map<std::string, std::vector<std::string>> all_names;  // per group: golden's, then new ones
  for (const auto& [group, list] : golden.names) all_names[group] = list;
  for (const auto& [group, list] : now.names) {
    auto& names = all_names[group];
    const auto known = pos_golden.find(group);
    for (const auto& n : list) {
      if (known == pos_golden.end() || !known->second.count(n)) names.push_back(n);
    }
  }
  for (const Key& key : order) {
    const auto& [variant, step, group] = key;
    ChangeGroup summary{variant, step, group, 0, 0, ""};
    for (const auto& name : all_names[group]) {
      const std::string a = digest_of(rows_golden, pos_golden, key, name);
      const std::string b = digest_of(rows_now, pos_now, key, name);
      if (a.empty() && b.empty()) continue;
      ++d.tensors;
      ++summary.total;
      if (a != b) {
        d.changes.push_back({variant, step, group, name, a, b});
        if (summary.changed++ == 0) summary.first = name;
      }
    }
    if (summary.changed > 0) d.changed_groups.push_back(std::move(summary));
  }
  return d;
}

}  // namespace mtp::golden

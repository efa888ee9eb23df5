// Goldens: made from records, written, parsed and compared (golden.h).

#include "harness/golden/golden.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "harness/common/environment.h"
#include "harness/common/error.h"
#include "harness/common/input_file.h"
#include "harness/record/record.h"

namespace mtp::golden {
namespace {

constexpr const char* kMagic = "mtp-harness-goldens 1";

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

GoldenFile golden_from_records(const std::string& scenario, const std::string& scenario_digest,
                               const std::vector<std::pair<std::string, std::string>>& records) {
  GoldenFile g;
  g.scenario = scenario;
  g.scenario_digest = scenario_digest;
  // Names per group, in canonical group order, each group's names in first-seen order.
  std::map<std::string, std::vector<std::string>> names;
  std::map<std::string, std::set<std::string>> seen;
  std::vector<std::pair<std::string, std::unique_ptr<record::RecordReader>>> readers;
  for (const auto& [variant, path] : records) {
    auto r = std::make_unique<record::RecordReader>(path);
    const auto fp = record_fingerprint(r->attrs());
    if (g.fingerprint.empty()) {
      g.fingerprint = fp;
    } else if (fp != g.fingerprint) {
      for (const auto& [k, v] : fp) {
        if (g.fingerprint[k] != v) {
          throw InputError(fmt::format("{}: fingerprint {} is \"{}\", but the scenario's first "
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
          const record::TensorInfo& info = r->info(step, group, name);
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
  return out;
}

GoldenFile parse_golden(const std::string& text, const std::string& source) {
  GoldenFile g;
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  auto fail = [&](const std::string& what) {
    throw InputError(fmt::format("{}:{}: {}", source, lineno, what));
  };
  std::vector<std::string>* pending = nullptr;  // names still to read
  size_t pending_count = 0;
  bool header = false;
  while (std::getline(in, line)) {
    ++lineno;
    if (!header) {
      if (line != kMagic) fail(fmt::format("not a goldens file (the first line must be \"{}\")", kMagic));
      header = true;
      continue;
    }
    if (pending != nullptr && pending->size() < pending_count) {
      if (line.size() < 3 || line.compare(0, 2, "  ") != 0 || line[2] == ' ') {
        fail(fmt::format("expected a tensor name (\"  <name>\"), {} of {} read", pending->size(),
                         pending_count));
      }
      pending->push_back(line.substr(2));
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind == "scenario") {
      words >> g.scenario;
    } else if (kind == "scenario_xxh3_128") {
      words >> g.scenario_digest;
    } else if (kind == "fingerprint") {
      std::string key, value;
      words >> key;
      std::getline(words, value);
      if (key.empty()) fail("fingerprint needs a key");
      g.fingerprint[key] = value.empty() ? "" : value.substr(1);
    } else if (kind == "names") {
      std::string group;
      long long count = -1;
      words >> group >> count;
      if (group.empty() || count < 0 || count > 10000000) fail("expected \"names <group> <count>\"");
      if (find_names(g, group) != nullptr) fail(fmt::format("names of group {} given twice", group));
      g.names.emplace_back(group, std::vector<std::string>{});
      pending = &g.names.back().second;
      pending_count = static_cast<size_t>(count);
    } else if (kind == "digests") {
      DigestRow r;
      long long step = -1;
      words >> r.variant >> step >> r.group;
      if (r.variant.empty() || step < 0 || step > 999999 || r.group.empty()) {
        fail("expected \"digests <variant> <step> <group> <digest>...\"");
      }
      r.step = static_cast<int>(step);
      const std::vector<std::string>* list = find_names(g, r.group);
      if (list == nullptr) fail(fmt::format("digests of group {} before its names", r.group));
      for (std::string d; words >> d;) {
        if (d == "-") {
          r.digests.emplace_back();
        } else if (is_hex16(d)) {
          r.digests.push_back(d);
        } else {
          fail(fmt::format("digest \"{}\" is not 16 lower-case hex digits or \"-\"", d));
        }
      }
      if (r.digests.size() != list->size()) {
        fail(fmt::format("{} digests for the {} names of group {}", r.digests.size(), list->size(),
                         r.group));
      }
      g.rows.push_back(std::move(r));
    } else {
      fail(fmt::format("unknown line kind \"{}\"", kind));
    }
  }
  if (!header) fail("empty file");
  if (pending != nullptr && pending->size() < pending_count) {
    fail(fmt::format("the file ends after {} of {} names", pending->size(), pending_count));
  }
  if (g.scenario.empty()) fail("no \"scenario\" line");
  return g;
}

GoldenFile read_golden_file(const std::string& path) {
  const std::vector<uint8_t> bytes = read_input_file(path, "goldens", kMaxSmallInputBytes);
  return parse_golden(std::string(bytes.begin(), bytes.end()), path);
}

std::string TensorChange::describe() const {
  return fmt::format("variant {} step {} {}/{}: golden {} now {}", variant, step, group, name,
                     golden.empty() ? "absent" : golden, now.empty() ? "absent" : now);
}

GoldenDiff diff_goldens(const GoldenFile& golden, const GoldenFile& now) {
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
    for (const auto& name : all_names[group]) {
      const std::string a = digest_of(rows_golden, pos_golden, key, name);
      const std::string b = digest_of(rows_now, pos_now, key, name);
      if (a.empty() && b.empty()) continue;
      ++d.tensors;
      if (a != b) d.changes.push_back({variant, step, group, name, a, b});
    }
  }
  return d;
}

}  // namespace mtp::golden

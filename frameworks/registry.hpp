#pragma once
// The frameworks shardplan models, by name and version. A name alone means the newest version;
// `name@version` (a command line) or {"name", "version"} (a runs file, a plan) picks another.
// Unknown names and versions are InputErrors naming the field and listing what exists.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "framework_model.hpp"

namespace shardplan::frameworks {

struct FrameworkEntry {
  std::string name;
  std::string summary;                // one line: what it is
  std::vector<std::string> versions;  // oldest first; the last is the default
  FrameworkModel (*build)(std::string_view version);
};

const std::vector<FrameworkEntry>& registry();
std::vector<std::string> framework_names();

// The model of `name` at `version` ("" = the newest). `field` names the input in errors
// ("--framework", "runs[3].framework.version").
FrameworkModel find_framework(const std::string& name, const std::string& version, const std::string& field);
// "name" or "name@version" (the command line's --framework).
FrameworkModel parse_framework_spec(const std::string& spec, const std::string& field);
// {"name": ..., "version": ... (optional)} or a plain "name[@version]" string (runs files, plans).
FrameworkModel framework_from_json(const nlohmann::json& j, const std::string& field);
// {"name", "version"}: what runs files and plans write.
nlohmann::json framework_ref_json(const FrameworkModel& fw);

}  // namespace shardplan::frameworks

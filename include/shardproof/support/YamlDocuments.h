// Reading a YAML text that must hold exactly one document, for the spec and
// relation-file loaders (both link yaml-cpp; support/ itself does not).
#pragma once

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <sstream>
#include <string>

namespace shardproof {

struct YamlDocuments {
  YAML::Node first;     // the first document (null for an empty text)
  bool more = false;    // a second document follows
  YAML::Mark secondAt;  // where it starts, when `more`
};

/// yaml-cpp 0.7's LoadAll loops forever, allocating a document per turn, on a
/// stray ',' at the top level (found by fuzzing: one ',' line hung a check and
/// ate gigabytes). So the first document comes from Load, and the documents are
/// counted by a loop that stops at the second. Throws YAML::Exception.
inline YamlDocuments loadYamlDocuments(const std::string &text) {
  struct Starts : YAML::EventHandler {
    unsigned n = 0;
    YAML::Mark second;
    void OnDocumentStart(const YAML::Mark &m) override {
      if (++n == 2)
        second = m;
    }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark &, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark &, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark &, const std::string &, YAML::anchor_t, const std::string &) override {}
    void OnSequenceStart(const YAML::Mark &, const std::string &, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark &, const std::string &, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}
  };
  YamlDocuments d;
  d.first = YAML::Load(text);
  std::istringstream in(text);
  YAML::Parser parser(in);
  Starts starts;
  for (unsigned turns = 0; turns < 2 && parser.HandleNextDocument(starts); ++turns) {
  }
  d.more = starts.n >= 2;
  d.secondAt = starts.second;
  return d;
}

} // namespace shardproof

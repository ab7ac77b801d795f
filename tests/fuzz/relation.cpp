// Fuzz target: the spec's expression languages. The first byte picks the
// parser (integer expression, constraint, relation) and the world size; the
// rest is the text. Besides never crashing, a parsed relation must render
// (RelExpr::str, used in reports and relation files) to text that parses back
// to the same rendering.
#include "FuzzUtil.h"

#include "shardproof/spec/Spec.h"

using namespace shardproof;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz::Choices in(data, size);
  uint8_t head = in.byte();
  std::string text = in.rest();
  spec::SymbolTable syms;
  syms.names = {"batch", "seq", "hidden", "vocab"};
  syms.allowAny = head & 0x80; // else unknown names are errors
  SrcLoc loc{"fuzz.yaml", 3, 7};
  switch (head & 3) {
  case 0: {
    auto e = spec::parseIntExpr(text, syms, loc);
    if (!e)
      fuzz::rejectInternal(e.takeError(), "parseIntExpr");
    else if (!e->isValid() || !e->isInt())
      fuzz::finding("parseIntExpr returned a non-integer expression");
    break;
  }
  case 1: {
    auto e = spec::parseConstraint(text, syms, loc);
    if (!e)
      fuzz::rejectInternal(e.takeError(), "parseConstraint");
    else if (!e->isValid() || !e->isBool())
      fuzz::finding("parseConstraint returned a non-boolean expression");
    break;
  }
  default: {
    int worldSize = 1 + ((head >> 2) & 7);
    auto r = spec::parseRelation(text, worldSize, syms, loc);
    if (!r) {
      fuzz::rejectInternal(r.takeError(), "parseRelation");
      break;
    }
    std::string shown = r->str();
    auto again = spec::parseRelation(shown, worldSize, syms, loc);
    if (!again)
      fuzz::finding("the rendering '" + shown + "' of '" + text +
                    "' does not parse back: " + shardproof::toString(again.takeError()));
    if (again->str() != shown)
      fuzz::finding("rendering is not stable: '" + shown + "' then '" + again->str() + "'");
    break;
  }
  }
  return 0;
}

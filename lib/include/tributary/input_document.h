// InputDocument: a document as a program holds it — raw text, named terms
// with counts, features by name, a class by name — which the library turns
// into a model's id space (its tokenizer, vocabulary and feature order), so
// that a program embedding the library never builds the wire format's
// messages itself.
//
//   InputDocument d;
//   d.SetId("ticket-17").AddText("Printer on fire again").SetLabel("urgent");
//   live->Learn(d);                       // live_model.h
//   d.Clear();
//   d.SetReal("temperature", 21.5).SetCategory("colour", "red");
//
// A value type: copy it, reuse it after Clear(). Not thread-safe (one
// document, one thread at a time); ToProto is const.
#ifndef TRIBUTARY_INPUT_DOCUMENT_H_
#define TRIBUTARY_INPUT_DOCUMENT_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tributary/schema.h"
#include "tributary/status.h"

namespace tributary {

namespace v1 {
class Document;
}

/// A document in names rather than ids (text, terms, features, class), built by chained setters and turned into
/// the wire format for a model's schema by ToProto. See the file comment for an example.
class InputDocument {
 public:
  /// The name errors give the document ("document #i (id 'ticket-17')").
  InputDocument& SetId(std::string id);
  /// Text split into terms by the library tokenizer (docs/tokenizer.md), each
  /// occurrence counted once. Several calls append, separated by a space.
  InputDocument& AddText(std::string_view text);
  /// A term exactly as the vocabulary names it (not tokenized), `count` times
  /// (finite, > 0: checked when the document is decoded). Repeats add up.
  InputDocument& AddTerm(std::string_view term, double count = 1.0);
  /// A REAL or COUNT feature's value.
  InputDocument& SetReal(std::string_view feature, double value);
  /// A CATEGORICAL feature's category, by name.
  InputDocument& SetCategory(std::string_view feature, std::string_view category);
  /// A feature whose value is missing (families that handle missing values).
  InputDocument& SetMissing(std::string_view feature);
  /// The class (labelled documents); without it the document is unlabelled.
  InputDocument& SetLabel(std::string_view class_name);
  /// Importance weight (> 0, finite; default 1).
  InputDocument& SetWeight(double weight);
  /// Back to an empty document (keeps the buffers' memory).
  void Clear();

  /// The id given by SetId; empty if none.
  const std::string& id() const { return id_; }
  /// True if SetLabel was called since construction or Clear().
  bool has_label() const { return has_label_; }
  /// The class name given by SetLabel; empty when !has_label().
  const std::string& label() const { return label_; }

  /// This document as the wire format's Document for a model of `schema`:
  /// features placed in the schema's order, categories as indices. Errors
  /// (kInvalidDocument, naming the feature; the document is named by the
  /// caller): a feature the schema does not have (the schema's features
  /// listed), a category the feature does not have, a category given to a
  /// REAL feature or a value to a CATEGORICAL one, a feature set twice. A
  /// feature of the schema not given is missing, as SetMissing makes it (the
  /// decoder refuses a missing value for a family that cannot use one,
  /// naming the feature). Terms, counts, label and weight are checked by
  /// DocumentDecoder, as for any document. Python's documents are built
  /// through this too: one rule set for every front end.
  Status ToProto(const ModelSchema& schema, v1::Document* out) const;

 private:
  struct FeatureValue {
    std::string name;
    bool categorical = false;
    bool missing = false;
    double value = 0;
    std::string category;
  };
  std::string id_, text_, label_;
  bool has_label_ = false;
  double weight_ = 1.0;
  std::vector<std::pair<std::string, double>> terms_;
  std::vector<FeatureValue> features_;
};

}  // namespace tributary

#endif  // TRIBUTARY_INPUT_DOCUMENT_H_

// Python objects -> documents (GIL held): a Python `x` as an InputDocument or
// as the wire format's document, a label, and a CSR matrix whose rows become
// buffers in the model's ids.
#ifndef TRIBUTARY_PYTHON_SRC_DOCUMENTS_H_
#define TRIBUTARY_PYTHON_SRC_DOCUMENTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common.h"
#include "tributary/document.h"
#include "tributary/input_document.h"
#include "tributary/model.h"
#include "tributary/schema.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary::python {

// What a Python `x` may be: raw text (tokenized as `convert` does: the
// decoder's text field), a dict term -> count, or, for a model with
// features, a dict feature name -> value (a number; a category name or index
// for a categorical feature; None, or the key left out, for missing). Built
// as an InputDocument (input_document.h), the library's one rule set for a
// document in names; only the Python types are checked here.
inline constexpr uint64_t kUnnumbered = UINT64_MAX;  // FillInput's index for a document the caller numbers itself
void FillInput(const ModelSchema& schema, const py::handle& x, uint64_t index, InputDocument* in);

// LiveClassifier's schema: text (its documents have no features).
const ModelSchema& TextOnlySchema();

// `x` as the wire format's document for a model of `schema` (FillInput, then
// InputDocument::ToProto; errors name the document).
void FillDocument(const ModelSchema& schema, const py::handle& x, uint64_t index, v1::Document* doc);

// `y` as the label of document `index` (None: none; else it must be a str).
void SetLabel(const py::handle& y, uint64_t index, v1::Document* doc);

// A CSR matrix (scipy.sparse, or a dense array made sparse in Python): row r
// is document r, column j term j of the model. Its rows become buffers
// directly, not wire documents: an all-zero row is a document with no words
// (scored by the class prior, learned as such), which a count matrix
// legitimately holds and the wire format's rule refuses.
using IndexArray = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;
using ValueArray = py::array_t<double, py::array::c_style | py::array::forcecast>;
struct Csr {
  IndexArray indptr, indices;
  ValueArray data;
  std::vector<std::optional<std::string>> labels;  // empty, or one per row
  std::vector<double> weights;                     // empty, or one per row (finite, > 0)
  int64_t rows() const { return static_cast<int64_t>(indptr.size()) - 1; }
};

// The matrix checked: indptr, indices and data agree; labels and weights, if
// given, one per row (a weight finite and > 0).
Csr MakeCsr(IndexArray indptr, IndexArray indices, ValueArray data, const py::object& labels,
            const py::object& weights = py::none());

// Row r as a document of a model with `vocab` terms (label left at -1).
// Errors name the row: a column out of range, a count that is not finite
// and >= 0 (zeros are not terms).
Status CsrRow(const Csr& m, int64_t r, uint64_t vocab, DocumentBuffer* out);

// The class index of `name` in `model`, adding it where the classes are open.
Status ResolveLabel(Model* model, const DocumentBuffer& b, const std::string& name, int64_t* label);

}  // namespace tributary::python

#endif  // TRIBUTARY_PYTHON_SRC_DOCUMENTS_H_

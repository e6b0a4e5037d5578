#include "documents.h"

#include <cmath>
#include <utility>

#include "tributary/model_config.h"
#include "tributary/plugin_abi.h"

namespace tributary::python {

void FillInput(const ModelSchema& schema, const py::handle& x, uint64_t index, InputDocument* in) {
  in->Clear();
  auto where = [&] { return index == kUnnumbered ? std::string("document") : DocumentName(index, ""); };
  auto type_name = [](const py::handle& v) { return py::str(py::type::of(v).attr("__name__")).cast<std::string>(); };
  if (py::isinstance<py::str>(x)) {
    if (!schema.features().empty()) {
      Throw(Status::InvalidDocument(where() + ": the model takes features (" +
                                    std::to_string(schema.features().size()) +
                                    "), not text: pass a dict feature name -> value"));
    }
    in->AddText(x.cast<std::string>());
    return;
  }
  if (!py::isinstance<py::dict>(x)) {
    Throw(Status::InvalidDocument(where() + ": expected text (str) or a dict, found " + type_name(x)));
  }
  auto d = py::reinterpret_borrow<py::dict>(x);
  for (auto [k, v] : d) {
    if (!py::isinstance<py::str>(k)) {
      Throw(Status::InvalidDocument(where() + ": " + (schema.features().empty() ? "terms" : "feature names") +
                                    " must be str, found " + type_name(k) + " " + py::repr(k).cast<std::string>()));
    }
    const std::string name = k.cast<std::string>();
    if (schema.features().empty()) {
      double c;
      try {
        c = v.cast<double>();
      } catch (const py::cast_error&) {
        Throw(Status::InvalidDocument(where() + ": the count of term '" + name + "' must be a number, found " +
                                      py::repr(v).cast<std::string>()));
      }
      in->AddTerm(name, c);
      continue;
    }
    const FeatureSpecInfo* spec = nullptr;
    for (const auto& f : schema.features()) spec = f.name == name ? &f : spec;
    if (v.is_none() || spec == nullptr) {
      in->SetMissing(name);  // (an unknown name is refused by ToProto, naming the features)
      continue;
    }
    if (spec->kind != TRIB_FEATURE_CATEGORICAL) {
      try {
        in->SetReal(name, v.cast<double>());
      } catch (const py::cast_error&) {
        Throw(Status::InvalidDocument(where() + ": feature '" + name + "' must be a number, found " +
                                      py::repr(v).cast<std::string>()));
      }
    } else if (py::isinstance<py::str>(v)) {
      in->SetCategory(name, v.cast<std::string>());
    } else if (py::isinstance<py::int_>(v) && !py::isinstance<py::bool_>(v)) {
      // A category by its index in the schema.
      const int64_t idx = v.cast<int64_t>();
      if (idx < 0 || idx >= static_cast<int64_t>(spec->categories.size())) {
        Throw(Status::InvalidDocument(where() + ": feature '" + name + "': category index " + std::to_string(idx) +
                                      " is not one of its " + std::to_string(spec->categories.size()) +
                                      " categories (0 .. " + std::to_string(spec->categories.size() - 1) + ")"));
      }
      in->SetCategory(name, spec->categories[static_cast<size_t>(idx)]);
    } else {
      Throw(Status::InvalidDocument(where() + ": feature '" + name +
                                    "' is categorical: expected a category name or index, found " +
                                    py::repr(v).cast<std::string>()));
    }
  }
}

const ModelSchema& TextOnlySchema() {
  static const ModelSchema* schema = [] {
    auto s = ModelSchema::FromProto(TextStreamSchema());
    return new ModelSchema(std::move(s).value());
  }();
  return *schema;
}

void FillDocument(const ModelSchema& schema, const py::handle& x, uint64_t index, v1::Document* doc) {
  InputDocument in;
  FillInput(schema, x, index, &in);
  Status st = in.ToProto(schema, doc);
  if (!st.ok()) Throw(st.WithContext(DocumentName(index, "")));
}

void SetLabel(const py::handle& y, uint64_t index, v1::Document* doc) {
  if (y.is_none()) return;
  if (!py::isinstance<py::str>(y)) {
    Throw(Status::InvalidDocument(DocumentName(index, "") +
                                  ": a label must be str (the Python classes convert), found " +
                                  py::repr(y).cast<std::string>()));
  }
  doc->set_label(y.cast<std::string>());
}

Csr MakeCsr(IndexArray indptr, IndexArray indices, ValueArray data, const py::object& labels,
            const py::object& weights) {
  Csr m{std::move(indptr), std::move(indices), std::move(data), {}, {}};
  if (m.rows() < 0) Throw(Status::InvalidArgument("csr: indptr is empty"));
  const int64_t* ip = m.indptr.data();
  if (m.indices.size() != m.data.size() || ip[0] != 0 || ip[m.rows()] != static_cast<int64_t>(m.indices.size())) {
    Throw(Status::InvalidArgument("csr: indptr, indices and data do not agree"));
  }
  for (int64_t r = 0; r < m.rows(); ++r) {
    if (ip[r + 1] < ip[r]) Throw(Status::InvalidArgument("csr: indptr decreases at row " + std::to_string(r)));
  }
  if (!labels.is_none()) {
    auto seq = py::reinterpret_borrow<py::sequence>(labels);
    if (static_cast<int64_t>(seq.size()) != m.rows()) {
      Throw(Status::InvalidArgument("csr: " + std::to_string(m.rows()) + " rows but " + std::to_string(seq.size()) +
                                    " labels"));
    }
    for (size_t r = 0; r < seq.size(); ++r) {
      v1::Document d;
      SetLabel(seq[r], r, &d);
      m.labels.push_back(d.has_label() ? std::optional<std::string>(d.label()) : std::nullopt);
    }
  }
  if (!weights.is_none()) {
    auto w = weights.cast<ValueArray>();
    if (static_cast<int64_t>(w.size()) != m.rows()) {
      Throw(Status::InvalidArgument("csr: " + std::to_string(m.rows()) + " rows but " + std::to_string(w.size()) +
                                    " weights"));
    }
    m.weights.assign(w.data(), w.data() + w.size());
    for (size_t r = 0; r < m.weights.size(); ++r) {
      if (!(std::isfinite(m.weights[r]) && m.weights[r] > 0)) {
        Throw(Status::InvalidDocument(DocumentName(r, "") + ": weight is " + std::to_string(m.weights[r]) +
                                      ", expected a finite number > 0"));
      }
    }
  }
  return m;
}

Status CsrRow(const Csr& m, int64_t r, uint64_t vocab, DocumentBuffer* out) {
  out->Clear();
  out->index = static_cast<uint64_t>(r);
  const int64_t* ip = m.indptr.data();
  const int64_t* ix = m.indices.data();
  const double* dv = m.data.data();
  for (int64_t p = ip[r]; p < ip[r + 1]; ++p) {
    if (ix[p] < 0 || static_cast<uint64_t>(ix[p]) >= vocab) {
      return Status::InvalidDocument(out->Name() + ": column " + std::to_string(ix[p]) +
                                     " is out of range (the model has " + std::to_string(vocab) + " terms)");
    }
    if (!(std::isfinite(dv[p]) && dv[p] >= 0)) {
      return Status::InvalidDocument(out->Name() + ": the count in column " + std::to_string(ix[p]) + " is " +
                                     std::to_string(dv[p]) + ", expected a finite count >= 0");
    }
    if (dv[p] == 0.0) continue;
    out->term_ids.push_back(static_cast<uint32_t>(ix[p]));
    out->term_counts.push_back(dv[p]);
  }
  if (!m.weights.empty()) out->weight = m.weights[static_cast<size_t>(r)];
  out->Canonicalize();
  return Status::OK();
}

Status ResolveLabel(Model* model, const DocumentBuffer& b, const std::string& name, int64_t* label) {
  *label = model->schema().ClassIndex(name);
  if (*label >= 0) return Status::OK();
  if (!model->schema().open_classes()) {
    std::string all;
    for (const auto& c : model->schema().classes()) all += (all.empty() ? "'" : ", '") + c + "'";
    return Status::InvalidDocument(b.Name() + ": label '" + name + "' is not a class of the model (" + all + ")");
  }
  TRIB_RETURN_IF_ERROR(model->AddClass(name).WithContext(b.Name()));
  *label = model->schema().ClassIndex(name);
  return Status::OK();
}

}  // namespace tributary::python

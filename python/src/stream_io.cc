#include "stream_io.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "documents.h"
#include "tributary/schema.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary::python {

StreamIter::StreamIter(const std::string& path, uint32_t max_frame_bytes) : path_(path) {
  reader_ = Take(DocumentReader::Open(path, max_frame_bytes));
}

py::dict StreamIter::header() const {
  const auto& h = reader_->fields();
  py::dict d;
  d["document_count"] = h.document_count();
  d["source"] = h.source();
  d["vocabulary_size"] = reader_->vocabulary().size();
  d["hashed_dim"] = h.schema().hashed_dim();
  d["open_vocabulary"] = h.schema().open_vocabulary();
  d["open_classes"] = h.schema().open_classes();
  std::vector<std::string> classes(h.schema().class_names().begin(), h.schema().class_names().end());
  d["classes"] = classes;
  py::list features;
  for (const auto& f : h.schema().features()) {
    features.append(py::make_tuple(f.name(),
                                   f.kind() == v1::FeatureSpec::CATEGORICAL ? "categorical"
                                   : f.kind() == v1::FeatureSpec::COUNT     ? "count"
                                                                            : "real",
                                   std::vector<std::string>(f.categories().begin(), f.categories().end())));
  }
  d["features"] = features;
  return d;
}

py::tuple StreamIter::Next() {
  v1::Document doc;
  bool eof = false;
  {
    py::gil_scoped_release nogil;
    Check(reader_->Next(&doc, &eof));
  }
  if (eof) throw py::stop_iteration();
  const auto& schema = reader_->fields().schema();
  const std::vector<std::string>& vocab = reader_->vocabulary();
  py::object x;
  if (!doc.text().empty()) {
    x = py::str(doc.text());
  } else if (schema.features_size() > 0 && doc.term_ids_size() == 0 && doc.tokens_size() == 0) {
    py::dict d;
    int ri = 0, ci = 0;
    for (int f = 0; f < schema.features_size(); ++f) {
      const auto& spec = schema.features(f);
      const bool missing = std::find(doc.missing_features().begin(), doc.missing_features().end(),
                                     static_cast<uint32_t>(f)) != doc.missing_features().end();
      if (spec.kind() == v1::FeatureSpec::CATEGORICAL) {
        const int at = ci++;
        if (missing || at >= doc.categoricals_size()) continue;
        const uint32_t c = doc.categoricals(at);
        d[py::str(spec.name())] = c < static_cast<uint32_t>(spec.categories_size())
                                      ? py::object(py::str(spec.categories(static_cast<int>(c))))
                                      : py::object(py::int_(c));
      } else {
        const int at = ri++;
        if (missing || at >= doc.reals_size()) continue;
        d[py::str(spec.name())] = doc.reals(at);
      }
    }
    x = d;
  } else {
    py::dict d;
    auto add = [&](const std::string& term, double c) {
      py::str k(term);
      d[k] = d.contains(k) ? d[k].cast<double>() + c : c;
    };
    for (int i = 0; i < doc.term_ids_size(); ++i) {
      const uint32_t id = doc.term_ids(i);
      const double c = i < doc.term_counts_size() ? doc.term_counts(i) : 1.0;
      add(id < vocab.size() ? vocab[id] : "#" + std::to_string(id), c);
    }
    for (int i = 0; i < doc.tokens_size(); ++i)
      add(doc.tokens(i), i < doc.token_counts_size() ? doc.token_counts(i) : 1.0);
    x = d;
  }
  py::object y = doc.has_label() ? py::object(py::str(doc.label())) : py::object(py::none());
  return py::make_tuple(x, y, doc.id());
}

uint64_t WriteStream(const std::string& path, const py::sequence& xs, const py::object& ys, const py::object& ids,
                     const std::string& source) {
  v1::StreamHeader header = NewStreamHeader(/*frame_checksum=*/true);
  header.mutable_schema()->set_open_vocabulary(true);
  header.mutable_schema()->set_open_classes(true);
  header.set_document_count(xs.size());
  header.set_source(source);
  ModelSchema text_schema = Take(ModelSchema::FromProto(header.schema()));
  std::vector<v1::Document> docs(xs.size());
  py::sequence ysq, idq;
  if (!ys.is_none()) ysq = py::reinterpret_borrow<py::sequence>(ys);
  if (!ids.is_none()) idq = py::reinterpret_borrow<py::sequence>(ids);
  if ((!ys.is_none() && ysq.size() != xs.size()) || (!ids.is_none() && idq.size() != xs.size())) {
    Throw(Status::InvalidArgument("write_stream: xs, ys and ids differ in length"));
  }
  for (size_t i = 0; i < docs.size(); ++i) {
    FillDocument(text_schema, xs[i], i, &docs[i]);
    if (!ys.is_none()) SetLabel(ysq[i], i, &docs[i]);
    if (!ids.is_none()) docs[i].set_id(py::str(idq[i]).cast<std::string>());
  }
  py::gil_scoped_release nogil;
  auto w = Take(DocumentWriter::Create(path, header));
  for (const auto& d : docs) Check(w->Write(d));
  Check(w->Close());
  return docs.size();
}

}  // namespace tributary::python

// _tributary: the Python binding of the library's learner API (learner.h,
// model_config.h, trainer.h). The Python package `tributary` (python/tributary)
// wraps it in River-style and scikit-learn-style classes; nothing here trains
// in its own way: documents go through the same DocumentDecoder, the same
// DecodeGrowing (open vocabulary, open classes) and the same Learner as
// `tributary train`, so one stream gives one model whichever front end read it.
//
// Threads and the GIL: every call that touches a model releases the GIL
// first, then takes the handle's mutex (never the other way round, so a
// thread holding the mutex never waits for the GIL). Python objects are
// converted into documents before the GIL is released. Errors: a Status
// becomes a C++ StatusError, translated into the module's exception classes
// (InvalidDocument, PluginError, ...), never a crash of the interpreter.
//
// The files: common.h (the py alias, StatusError and the plugin registry),
// documents.h (Python objects -> documents, CSR matrices), handle.h (the
// model handle, tributary.Model, and its learning and scoring), stream_io.h
// (stream files read and written); this one the module's bindings.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common.h"
#include "documents.h"
#include "handle.h"
#include "stream_io.h"
#include "tributary/input_document.h"
#include "tributary/learner.h"
#include "tributary/live_learner.h"
#include "tributary/live_model.h"
#include "tributary/model.h"
#include "tributary/model_config.h"
#include "tributary/plugin_registry.h"
#include "tributary/quality_monitor.h"
#include "tributary/schema.h"
#include "tributary/stream_io.h"
#include "tributary/tokenizer.h"
#include "tributary/v1/tributary.pb.h"
#include "tributary/version.h"

namespace tributary::python {
namespace {

// LiveModel (live_model.h) for Python: one handle learned from any thread,
// a reader per predicting thread (tributary.LiveClassifier keeps one per
// Python thread). A reader holds the handle, so the handle outlives every
// reader whatever order Python frees them in.
struct LiveHolder {
  std::unique_ptr<LiveModel> live;
};
struct LiveReaderBox {
  std::shared_ptr<LiveHolder> owner;  // declared first: destroyed last
  std::unique_ptr<LiveModel::Reader> reader;
};

}  // namespace
}  // namespace tributary::python

PYBIND11_MODULE(_tributary, mod) {
  using namespace tributary;
  using namespace tributary::python;
  mod.doc() = "Tributary's learner API (the C++ library), wrapped by the `tributary` package";

  // Exceptions: one class per Status code, all under tributary.Error, some
  // also under the built-in exception a Python caller would catch.
  static py::exception<StatusError> error(mod, "Error", PyExc_RuntimeError);
  struct ExceptionClass {
    Status::Code code;
    const char* name;
    PyObject* also;  // a second base, or null
  };
  const ExceptionClass table[] = {
      {Status::Code::kInvalidArgument, "InvalidArgument", PyExc_ValueError},
      {Status::Code::kInvalidDocument, "InvalidDocument", PyExc_ValueError},
      {Status::Code::kCorruption, "CorruptionError", nullptr},
      {Status::Code::kNotFound, "NotFoundError", PyExc_LookupError},
      {Status::Code::kPluginError, "PluginError", nullptr},
      {Status::Code::kNumeric, "NumericError", PyExc_ArithmeticError},
      {Status::Code::kIOError, "IOError", PyExc_OSError},
  };
  // Indexed by Status::Code; null: tributary.Error itself.
  static std::vector<py::handle> by_code(static_cast<size_t>(Status::Code::kInternal) + 1);
  for (const auto& c : table) {
    py::object bases = c.also ? py::object(py::make_tuple(error, py::handle(c.also))) : py::object(error);
    py::handle cls = PyErr_NewException((std::string("_tributary.") + c.name).c_str(), bases.ptr(), nullptr);
    mod.attr(c.name) = cls;
    by_code[static_cast<size_t>(c.code)] = cls;
  }
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      const auto code = static_cast<size_t>(e.status.code());
      py::handle cls = code < by_code.size() && by_code[code] ? by_code[code] : py::handle(error);
      PyErr_SetString(cls.ptr(), e.status.message().c_str());
    }
  });

  mod.def("version", [] { return std::string(Version()); });
  mod.def(
      "set_builtin_plugin_dir", [](const std::string& dir) { BuiltinDir() = dir; },
      "The built-in plugin directory (the package's); before the first model only.");
  mod.def(
      "tokenize",
      [](const std::string& text) {
        std::vector<std::string> out;
        Tokenize(text, &out);
        return out;
      },
      "The library's tokenizer: the words `convert` and raw text learn from (docs/tokenizer.md).");
  mod.def(
      "hash_term", [](const std::string& term, uint64_t dim) { return HashToken(term, dim); },
      "The id a hashed vocabulary of `dim` ids gives `term` (as `convert --hashed-dim`).");
  mod.def(
      "plugins",
      [] {
        py::gil_scoped_release nogil;
        const auto& all = Registry().plugins();
        py::gil_scoped_acquire gil;
        py::list out;
        for (const auto& p : all) {
          py::dict d;
          d["kind"] = KindName(p->kind);
          d["name"] = p->name;
          d["version"] = p->version;
          d["description"] = p->description;
          d["path"] = p->path;
          d["builtin"] = p->builtin;
          out.append(d);
        }
        return out;
      },
      "Every plugin found on the search path (the package's built-ins, then $TRIBUTARY_PLUGIN_PATH).");
  mod.def(
      "add_plugin",
      [](const std::string& path) {
        py::gil_scoped_release nogil;
        Check(Registry().Add(path));
      },
      "Loads a plugin file and registers it under its name (as `tributary --plugin PATH`).");

  mod.def(
      "train_offline",
      [](const std::string& family, const std::string& loss, const py::dict& options, const py::dict& loss_options,
         const py::dict& schedule, double n, uint64_t seed, const py::object& classes, const py::object& vocabulary,
         uint64_t hashed_dim, const py::object& features, const py::object& xs, const py::object& ys,
         const py::object& csr, uint32_t epochs, uint32_t threads, bool skip_bad, const py::object& weights) {
        // Classes given: a closed set; none: open, as they come.
        const v1::Schema proto = NewSchema(family, classes, classes.is_none(), vocabulary, hashed_dim, features);
        std::vector<v1::Document> docs;
        std::optional<Csr> matrix;
        if (!csr.is_none()) {
          auto t = py::reinterpret_borrow<py::tuple>(csr);
          matrix = MakeCsr(t[0].cast<IndexArray>(), t[1].cast<IndexArray>(), t[2].cast<ValueArray>(), ys, weights);
        } else {
          // Text or dicts: the schema decides how a dict reads (features or terms).
          ModelSchema schema = Take(ModelSchema::FromProto(proto));
          auto seq = py::reinterpret_borrow<py::sequence>(xs);
          auto ysq = py::reinterpret_borrow<py::sequence>(ys);
          if (seq.size() != ysq.size()) {
            Throw(Status::InvalidArgument("fit: " + std::to_string(seq.size()) + " documents but " +
                                          std::to_string(ysq.size()) + " labels"));
          }
          docs.resize(seq.size());
          for (size_t i = 0; i < docs.size(); ++i) {
            FillDocument(schema, seq[i], i, &docs[i]);
            SetLabel(ysq[i], i, &docs[i]);
          }
        }
        auto [handle, report] = TrainOffline(family, loss, options, loss_options, schedule, n, seed, proto, docs,
                                             matrix ? &*matrix : nullptr, epochs, threads, skip_bad);
        return py::make_tuple(handle, report);
      },
      py::arg("family"), py::arg("loss"), py::arg("options"), py::arg("loss_options"), py::arg("schedule"),
      py::arg("n"), py::arg("seed"), py::arg("classes"), py::arg("vocabulary"), py::arg("hashed_dim"),
      py::arg("features"), py::arg("xs"), py::arg("ys"), py::arg("csr"), py::arg("epochs"), py::arg("threads"),
      py::arg("skip_bad"), py::arg("weights") = py::none(),
      "train's defaults (trainer.h) on documents in memory; returns (model, training report as JSON).");

  py::class_<StreamIter>(mod, "StreamReader")
      .def(py::init<const std::string&, uint32_t>(), py::arg("path"),
           py::arg("max_frame_bytes") = kDefaultMaxFrameBytes)
      .def("header", &StreamIter::header)
      .def("__iter__", [](StreamIter& it) -> StreamIter& { return it; })
      .def("__next__", &StreamIter::Next);
  mod.def("write_stream", &WriteStream, py::arg("path"), py::arg("xs"), py::arg("ys"), py::arg("ids"),
          py::arg("source") = "python",
          "Writes documents as a stream (open vocabulary and classes) that `tributary train` reads.");

  py::class_<LiveReaderBox, std::shared_ptr<LiveReaderBox>>(mod, "LiveReader")
      .def(
          "predict",
          [](LiveReaderBox& r, const py::object& x) {
            InputDocument d;
            FillInput(TextOnlySchema(), x, kUnnumbered, &d);
            LivePrediction p;
            {
              py::gil_scoped_release nogil;
              Check(r.reader->Predict(d, &p));
            }
            return py::make_tuple(p.label, p.version);
          },
          py::arg("x"), "(predicted class, version): no lock, never waits for learning");
  py::class_<LiveHolder, std::shared_ptr<LiveHolder>>(mod, "LiveModel")
      .def(py::init([](const std::string& family, const std::string& loss, const std::vector<std::string>& classes,
                       bool open_classes, double n, uint64_t seed, uint64_t publish_every, const std::string& data_dir,
                       const std::string& select) {
             ModelConfig c;
             c.family = family;
             c.loss = loss;
             c.n = n;
             c.seed = seed;
             if (select != "auto" && select != "off") {
               Throw(Status::InvalidArgument("select: expected 'auto' or 'off', found '" + select + "'"));
             }
             auto h = std::make_shared<LiveHolder>();
             py::gil_scoped_release nogil;
             auto fam = Registry().Find(family, TRIB_KIND_FAMILY);
             const v1::Schema schema = DefaultTextSchema(fam.ok() ? fam->get() : nullptr, 0, classes, open_classes);
             auto m = Take(NewModel(c, Registry(), schema, 0, "LiveClassifier"));
             m = LiveOrSingle(select, "auto", c, std::move(m), [&](const ModelConfig& cc) {
               return NewModel(cc, Registry(), schema, 0, "LiveClassifier");
             });
             LiveModelOptions o;
             o.publish_every = publish_every;
             o.data_dir = data_dir;
             o.registry = &Registry();
             h->live = Take(LiveModel::Create(std::move(m), o));
             return h;
           }),
           py::arg("family"), py::arg("loss"), py::arg("classes"), py::arg("open_classes"), py::arg("n"),
           py::arg("seed"), py::arg("publish_every"), py::arg("data_dir"), py::arg("select") = "off")
      .def(
          "learn_one",
          [](LiveHolder& h, const py::object& x, const py::object& y) {
            InputDocument d;
            FillInput(TextOnlySchema(), x, kUnnumbered, &d);
            if (!y.is_none()) d.SetLabel(y.cast<std::string>());
            py::gil_scoped_release nogil;
            Check(h.live->Learn(d));
          },
          py::arg("x"), py::arg("y"))
      .def(
          "learn_many",
          [](LiveHolder& h, const py::sequence& xs, const py::sequence& ys) {
            if (xs.size() != ys.size()) {
              Throw(Status::InvalidArgument("learn_many: " + std::to_string(xs.size()) + " documents but " +
                                            std::to_string(ys.size()) + " labels"));
            }
            std::vector<InputDocument> docs(xs.size());
            for (size_t i = 0; i < docs.size(); ++i) {
              FillInput(TextOnlySchema(), xs[i], i, &docs[i]);
              if (!ys[i].is_none()) docs[i].SetLabel(py::str(ys[i]).cast<std::string>());
            }
            std::vector<LearnResult> results;
            py::gil_scoped_release nogil;
            Check(h.live->LearnBatch(docs, &results));  // durable: one fsync for the batch
            return static_cast<uint64_t>(
                std::count_if(results.begin(), results.end(), [](const LearnResult& r) { return !r.skipped; }));
          },
          py::arg("xs"), py::arg("ys"))
      .def("publish",
           [](LiveHolder& h) {
             py::gil_scoped_release nogil;
             return Take(h.live->Publish());
           })
      .def("checkpoint",
           [](LiveHolder& h) {
             py::gil_scoped_release nogil;
             Check(h.live->Checkpoint());
           })
      .def("save",
           [](LiveHolder& h, const std::string& path) {
             uint64_t v = 0;
             py::gil_scoped_release nogil;
             Check(h.live->SaveSnapshot(path, &v));
             return v;
           })
      .def("live_report",
           [](LiveHolder& h) {
             py::gil_scoped_release nogil;
             return h.live->live_report();
           })
      .def_property_readonly("version", [](const LiveHolder& h) { return h.live->version(); })
      .def_property_readonly("acknowledged", [](const LiveHolder& h) { return h.live->acknowledged(); })
      .def("reader", [](const std::shared_ptr<LiveHolder>& h) {
        auto box = std::make_shared<LiveReaderBox>();
        box->owner = h;
        box->reader = Take(h->live->NewReader());
        return box;
      });

  py::class_<Handle, std::shared_ptr<Handle>>(mod, "Model")
      .def(py::init(&Create), py::arg("family"), py::arg("loss"), py::arg("options"), py::arg("loss_options"),
           py::arg("schedule"), py::arg("n"), py::arg("seed"), py::arg("engine"), py::arg("damping"),
           py::arg("classes"), py::arg("open_classes"), py::arg("vocabulary"), py::arg("hashed_dim"),
           py::arg("features"), py::arg("select") = "off")
      .def_static(
          "from_bytes",
          [](const py::bytes& b, const std::string& name, const std::string& engine, uint64_t seed) {
            std::string s = b;
            std::unique_ptr<Model> m;
            {
              py::gil_scoped_release nogil;
              m = Take(Model::Parse(s, name, Registry()));
            }
            return std::make_shared<Handle>(std::move(m), LearnerFrom(engine, seed, 0));
          },
          py::arg("data"), py::arg("name") = "<bytes>", py::arg("engine") = "auto", py::arg("seed") = 1)
      .def_static(
          "load",
          [](const std::string& path, const std::string& engine, uint64_t seed) {
            std::unique_ptr<Model> m;
            {
              py::gil_scoped_release nogil;
              m = Take(Model::Load(path, Registry()));
            }
            return std::make_shared<Handle>(std::move(m), LearnerFrom(engine, seed, 0));
          },
          py::arg("path"), py::arg("engine") = "auto", py::arg("seed") = 1)
      .def("save", [](Handle& h, const std::string& path) { h.Locked([&] { Check(h.SaveLocked(path)); }); })
      .def("flush",
           [](Handle& h) {
             // The live learner: the documents held in its per-class sample
             // learned now (at the end of a stream); nothing for one model.
             h.Locked([&] {
               if (h.live()) Check(h.live()->Flush());
             });
           })
      .def("to_bytes",
           [](Handle& h) {
             std::string s;
             h.Locked([&] { s = Take(h.SerializeLocked()); });
             return py::bytes(s);
           })
      .def(
          "learn_many",
          [](Handle& h, const py::sequence& xs, const py::object& ys, bool skip_bad) {
            auto docs = ToDocuments(h, xs, ys, h.documents_learned());
            return LearnDocuments(h, docs, skip_bad);
          },
          py::arg("xs"), py::arg("ys"), py::arg("skip_bad") = false)
      .def(
          "learn_one",
          [](Handle& h, const py::object& x, const py::object& y) {
            std::vector<v1::Document> docs(1);
            FillDocument(h.model().schema(), x, h.documents_learned(), &docs[0]);
            SetLabel(y, h.documents_learned(), &docs[0]);
            LearnDocuments(h, docs, false);
          },
          py::arg("x"), py::arg("y"))
      .def("quality",
           [](Handle& h) {
             // The prequential figures (quality_monitor.h) as a dict; class
             // names from the model's schema.
             // Copied under the mutex, then turned into Python objects
             // without it (making them may run Python code, e.g. json.loads
             // or a finalizer, and let another thread take the GIL and wait
             // for the mutex: a deadlock).
             struct Copy {
               QualityMonitor q;
               std::vector<std::string> names;
               std::string live_json;
               std::vector<uint64_t> live_alarms;
               bool live = false;
             };
             const Copy copy = h.Locked([&] {
               Copy c{h.quality(), h.model().schema().classes(), "", {}, h.live() != nullptr};
               if (c.live) {
                 c.live_json = h.live()->ToJson();
                 for (const LiveAlarm& a : h.live()->alarms()) c.live_alarms.push_back(a.document);
               }
               return c;
             });
             py::dict d;
             const QualityMonitor& q = copy.q;
             const std::vector<std::string>& names = copy.names;
             auto name = [&](uint32_t k) { return k < names.size() ? names[k] : std::to_string(k); };
             auto num = [](double x) { return std::isnan(x) ? py::object(py::none()) : py::object(py::float_(x)); };
             d["documents"] = q.documents();
             // A live learner: its candidates, the one served, its alarms.
             if (copy.live) d["live"] = py::module_::import("json").attr("loads")(copy.live_json);
             d["accuracy"] = num(q.accuracy());
             d["window_accuracy"] = num(q.window_accuracy());
             d["log_loss"] = num(q.log_loss());
             d["window_log_loss"] = num(q.window_log_loss());
             py::list per_class;
             for (uint32_t k = 0; k < q.classes().size(); ++k) {
               const ClassQuality& c = q.classes()[k];
               if (c.documents == 0) continue;
               py::dict e;
               e["class"] = name(k);
               e["documents"] = c.documents;
               e["recall"] = static_cast<double>(c.correct) / static_cast<double>(c.documents);
               e["window_recall"] = c.window_recall;
               per_class.append(e);
             }
             d["per_class"] = per_class;
             py::list confused;
             for (const Confusion& c : q.MostConfused(10)) {
               py::dict e;
               e["class"] = name(c.truth);
               e["predicted"] = name(c.predicted);
               e["documents"] = c.documents;
               confused.append(e);
             }
             d["most_confused"] = confused;
             if (copy.live) {
               // The live learner's alarms (the ones that raised its steps).
               d["drift_alarms"] = copy.live_alarms;
             } else {
               d["drift_alarms"] = q.alarms();
             }
             return d;
           })
      .def(
          "learn_csr",
          [](Handle& h, py::array_t<int64_t, py::array::c_style | py::array::forcecast> indptr,
             py::array_t<int64_t, py::array::c_style | py::array::forcecast> indices,
             py::array_t<double, py::array::c_style | py::array::forcecast> data, const py::object& labels,
             bool skip_bad, const py::object& weights) {
            return LearnCsr(h, MakeCsr(indptr, indices, data, labels, weights), skip_bad);
          },
          py::arg("indptr"), py::arg("indices"), py::arg("data"), py::arg("labels"), py::arg("skip_bad") = false,
          py::arg("weights") = py::none())
      .def("scores_many",
           [](Handle& h, const py::sequence& xs) { return ScoreDocuments(h, ToDocuments(h, xs, py::none(), 0)); })
      .def("scores_csr",
           [](Handle& h, py::array_t<int64_t, py::array::c_style | py::array::forcecast> indptr,
              py::array_t<int64_t, py::array::c_style | py::array::forcecast> indices,
              py::array_t<double, py::array::c_style | py::array::forcecast> data) {
             return ScoreCsr(h, MakeCsr(indptr, indices, data, py::none()));
           })
      .def_property_readonly("classes",
                             [](Handle& h) {
                               auto c = h.Locked([&] { return h.model().schema().classes(); });
                               return py::cast(c);
                             })
      .def_property_readonly("output_names",
                             [](Handle& h) {
                               return py::cast(h.Locked([&] {
                                 std::vector<std::string> names;
                                 for (uint32_t k = 0; k < h.model().num_outputs(); ++k)
                                   names.push_back(h.model().OutputName(k));
                                 return names;
                               }));
                             })
      .def("vocabulary",
           [](Handle& h) {
             auto v = h.Locked([&] { return h.model().schema().vocabulary(); });
             return py::cast(v);
           })
      .def("component_terms",
           [](Handle& h, uint32_t k) {
             std::vector<double> out;
             h.Locked([&] { Check(h.model().ComponentTerms(k, &out)); });
             py::array_t<double> a(out.size());
             std::copy(out.begin(), out.end(), a.mutable_data());
             return a;
           })
      .def("info", &Info)
      .def("prequential_many",
           [](Handle& h, const py::sequence& xs, const py::object& ys) {
             auto docs = ToDocuments(h, xs, ys, h.documents_learned());
             std::vector<uint8_t> correct(docs.size());
             std::vector<double> ncll(docs.size());
             h.Locked([&] {
               for (size_t i = 0; i < docs.size(); ++i) {
                 bool c = false;
                 Check(h.PrequentialLocked(docs[i], &c, &ncll[i]));
                 correct[i] = c;
               }
             });
             py::array_t<bool> a(correct.size());
             std::copy(correct.begin(), correct.end(), a.mutable_data());
             py::array_t<double> b(ncll.size());
             std::copy(ncll.begin(), ncll.end(), b.mutable_data());
             return py::make_tuple(a, b);
           })
      .def("evaluate_latent",
           [](Handle& h, const py::sequence& xs) { return EvaluateLatent(h, ToDocuments(h, xs, py::none(), 0)); })
      .def("learn_file", &LearnFile, py::arg("path"), py::arg("skip_bad") = false,
           py::arg("max_frame_bytes") = kDefaultMaxFrameBytes)
      // Pickled as its snapshot (the bytes `save` writes) and learner settings.
      .def(py::pickle(
          [](Handle& h) {
            std::string s;
            h.Locked([&] { s = Take(h.SerializeLocked()); });
            const auto& lo = h.learner_options();
            return py::make_tuple(py::bytes(s), EngineName(lo.engine), lo.seed, lo.damping);
          },
          [](const py::tuple& t) {
            if (t.size() != 4) Throw(Status::InvalidArgument("unpickling a tributary model: unexpected state"));
            std::string s = t[0].cast<py::bytes>();
            std::unique_ptr<Model> m;
            {
              py::gil_scoped_release nogil;
              m = Take(Model::Parse(s, "<pickle>", Registry()));
            }
            return std::make_shared<Handle>(
                std::move(m), LearnerFrom(t[1].cast<std::string>(), t[2].cast<uint64_t>(), t[3].cast<double>()));
          }))
      .def_property_readonly("stats_digest", [](Handle& h) {
        auto d = h.Locked([&] { return h.served().StatsDigest(); });
        return d;
      });
}

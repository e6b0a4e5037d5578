// The family vtable of emsd-mixture and edcm-mixture.
#include "count_mixture.h"

namespace tributary::count_mixture {

namespace {

template <Flavor F>
int CreateFlavor(const trib_schema* schema, const trib_option* opts, size_t n, trib_family_model** out,
                 trib_error* err) {
  return Create(F, schema, opts, n, out, err);
}

}  // namespace

int Init(Flavor flavor, const trib_host_api* host, trib_plugin_vtable* out, trib_error* err) {
  if (int rc = sdk::BeginFamilyVtable<Model, State>(host, out, err); rc != TRIB_OK) return rc;
  trib_family_vtable& v = out->family;
  v.create = flavor == Flavor::kEmsd ? CreateFlavor<Flavor::kEmsd> : CreateFlavor<Flavor::kEdcm>;
  v.layout = Layout;
  v.init_stats = InitStats;
  v.rebuild = Rebuild;
  v.state_create = StateCreate;
  v.score = Score;
  v.accumulate = Accumulate;
  v.commit = Commit;
  v.export_cache = ExportCache;
  v.import_cache = ImportCache;
  v.outputs = Outputs;
  v.component_terms = ComponentTerms;
  v.sep = &kSepHooks;
  return TRIB_OK;
}

}  // namespace tributary::count_mixture

// Assembles the op table from each op file's registration hook.
#include "autograd/op_table.h"

namespace graft {

const std::vector<OpInfo>& op_table() {
  static const std::vector<OpInfo> table = [] {
    std::vector<OpInfo> t;
    register_elementwise_ops(t);
    register_shape_ops(t);
    register_reduce_ops(t);
    register_linalg_ops(t);
    register_norm_ops(t);
    register_index_ops(t);
    register_loss_ops(t);
    register_random_ops(t);
    register_fused_ops(t);
    register_conv_ops(t);
    register_attention_ops(t);
    register_rnn_ops(t);
    return t;
  }();
  return table;
}

const OpInfo* find_op(const std::string& name) {
  for (const OpInfo& op : op_table())
    if (name == op.name) return &op;
  return nullptr;
}

}  // namespace graft

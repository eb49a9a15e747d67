// Subcommands that live in their own files (tools/cmd_*.cpp). Each file defines one registrar
// that adds its subcommands (to the top-level app, or under `graft train`) and pushes, for each,
// the CLI::App it created and the function to run when that subcommand was parsed. main() in
// graft_cli.cpp calls every registrar listed here, parses, then runs the parsed command; a
// graft::Error thrown by a command prints "graft: error: ..." and exits 1.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <utility>
#include <vector>

namespace graft::tools {

struct Command {
  CLI::App* app;             // the subcommand (runs when app->parsed())
  std::function<int()> run;  // returns the exit status
};
using Commands = std::vector<Command>;

// One line per file: void register_<area>_commands(CLI::App& app, CLI::App& train, Commands&);
// (compile-info: tools/cmd_compile.cpp, seq2seq: tools/cmd_seq2seq.cpp, ...)
#define GRAFT_TOOL_REGISTRARS(X) X(register_compile_commands) X(register_seq2seq_commands) X(register_abcnn_commands) X(register_transformer_commands) X(register_bert_commands) X(register_bert_finetune_commands) X(register_predict_commands) X(register_sample_commands) X(register_bleu_commands) X(register_average_commands)

#define GRAFT_DECLARE_REGISTRAR(fn) void fn(CLI::App& app, CLI::App& train, Commands& cmds);
GRAFT_TOOL_REGISTRARS(GRAFT_DECLARE_REGISTRAR)
#undef GRAFT_DECLARE_REGISTRAR

}  // namespace graft::tools

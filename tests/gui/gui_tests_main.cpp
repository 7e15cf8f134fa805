// One executable, one QTest class per ctest entry: `gui_tests <class> [QTest options]`.
#include <QApplication>
#include <QTest>
#include <cstdio>
#include <cstring>
#include <memory>

QObject* make_inputs_test();
QObject* make_search_test();
QObject* make_export_test();
QObject* make_model_test();

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  const std::pair<const char*, QObject* (*)()> suites[] = {{"inputs", make_inputs_test},
                                                           {"search", make_search_test},
                                                           {"export", make_export_test},
                                                           {"model", make_model_test}};
  int status = 0;
  bool ran = false;
  for (const auto& [name, make] : suites) {
    if (argc > 1 && std::strcmp(argv[1], name) != 0 && std::strcmp(argv[1], "all") != 0) continue;
    ran = true;
    std::unique_ptr<QObject> suite(make());
    char* args[] = {argv[0]};
    status |= QTest::qExec(suite.get(), 1, args);
  }
  if (!ran) std::fprintf(stderr, "gui_tests: unknown suite '%s' (inputs, search, export, model, all)\n", argv[1]);
  return ran ? status : 2;
}

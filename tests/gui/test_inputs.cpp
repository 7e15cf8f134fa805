// Inputs: validated as typed, the reason inline, Run disabled while anything is wrong.
#include <QAction>
#include <QLineEdit>
#include <QTest>
#include <fstream>

#include "gui_test_support.hpp"

namespace shardplan::gui::testing {

class InputsTest : public QObject {
  Q_OBJECT
 private slots:
  void validInputsEnableRun() {
    Harness h;
    QVERIFY(h.window->inputs()->valid());
    QVERIFY(h.window->runAction()->isEnabled());
    for (const auto& f : request_fields()) QCOMPARE(h.window->inputs()->errorText(f), QString());
  }

  void typedBadNodesShowReasonAndDisableRun() {
    Harness h;
    QLineEdit* nodes = h.window->inputs()->editor("nodes");
    QVERIFY(nodes);
    nodes->clear();
    QTest::keyClicks(nodes, "2-x");
    QVERIFY(!h.window->inputs()->valid());
    QVERIFY(!h.window->runAction()->isEnabled());
    const QString why = h.window->inputs()->errorText("nodes");
    QVERIFY2(why.contains("--nodes") && why.contains("2-x"), qPrintable(why));
    // Run does nothing while the inputs are invalid.
    h.window->runSearch();
    QVERIFY(!h.window->worker()->isRunning());
    // Fixing it clears the message and enables Run again.
    nodes->clear();
    QTest::keyClicks(nodes, "1-2");
    QVERIFY(h.window->inputs()->valid());
    QVERIFY(h.window->runAction()->isEnabled());
    QCOMPARE(h.window->inputs()->errorText("nodes"), QString());
  }

  void numbersOutOfRangeNameTheField() {
    Harness h;
    auto* panel = h.window->inputs();
    const std::pair<const char*, const char*> cases[] = {{"seq_len", "0"},
                                                         {"lora_dropout", "1.5"},
                                                         {"headroom", "abc"},
                                                         {"train_tokens", "-5"},
                                                         {"require", "warp-drive"},
                                                         {"global_batch", "16,x"},
                                                         {"packed_document_tokens", "-1"},
                                                         {"packed_document_tokens", "1000000"}};
    for (const auto& [field, text] : cases) {
      panel->editor(field)->setText(text);
      QVERIFY2(!panel->valid(), field);
      QVERIFY2(!panel->errorText(field).isEmpty(), field);
      QVERIFY(!h.window->runAction()->isEnabled());
      panel->setRequest(small_request());
      QVERIFY(panel->valid());
    }
  }

  void brokenConfigJsonNamesFileAndField() {
    Harness h;
    const std::string path = h.dir.file("config.json");
    std::ofstream(path) << R"({"model_type": "llama", "hidden_size": "big", "num_attention_heads": 8,
                              "num_hidden_layers": 2, "intermediate_size": 64, "vocab_size": 100})";
    h.window->inputs()->editor("model")->setText(QString::fromStdString(path));
    QVERIFY(!h.window->runAction()->isEnabled());
    const QString why = h.window->inputs()->errorText("model");
    QVERIFY2(why.contains(QString::fromStdString(path)) && why.contains("hidden_size"), qPrintable(why));
    // Not JSON at all.
    std::ofstream(path) << "{ not json";
    h.window->inputs()->editor("model")->setText(QString::fromStdString(path) + " ");
    QVERIFY2(h.window->inputs()->errorText("model").contains(QString::fromStdString(path)),
             qPrintable(h.window->inputs()->errorText("model")));
  }

  void unknownLoraTargetIsExplained() {
    Harness h;
    h.window->inputs()->editor("lora_rank")->setText("8");
    h.window->inputs()->editor("lora_targets")->setText("q_proj,warp_proj");
    QVERIFY(!h.window->inputs()->valid());
    QVERIFY2(h.window->inputs()->errorText("lora_targets").contains("warp_proj"),
             qPrintable(h.window->inputs()->errorText("lora_targets")));
    h.window->inputs()->editor("lora_targets")->setText("q_proj,v_proj");
    QVERIFY(h.window->inputs()->valid());
  }

  // FP8 on the request's A100 profile is refused on the FP8 field; auto searches none there.
  void fp8OnAnA100IsExplained() {
    Harness h;
    auto* panel = h.window->inputs();
    panel->editor("fp8")->setText("none,delayed");
    QVERIFY(!panel->valid());
    QVERIFY2(panel->errorText("fp8").contains("FP8 tensor cores"), qPrintable(panel->errorText("fp8")));
    QVERIFY(!h.window->runAction()->isEnabled());
    panel->editor("fp8")->setText("auto");
    QVERIFY(panel->valid());
  }
};

}  // namespace shardplan::gui::testing

#include "test_inputs.moc"

QObject* make_inputs_test() { return new shardplan::gui::testing::InputsTest; }

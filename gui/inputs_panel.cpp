#include "inputs_panel.hpp"

#include <QComboBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QToolButton>
#include <QVBoxLayout>

#include "simulator/hardware_profile.hpp"
#include "simulator/model_spec.hpp"

namespace shardplan::gui {

namespace {

QStringList to_qt(const std::vector<std::string>& v) {
  QStringList out;
  for (const auto& s : v) out << QString::fromStdString(s);
  return out;
}

}  // namespace

InputsPanel::InputsPanel(QWidget* parent) : QWidget(parent) {
  buildForm();
  setRequest(PlanRequest{});
}

QWidget* InputsPanel::lineField(const std::string& field, const QString& placeholder, const QString& tip) {
  auto* edit = new QLineEdit;
  edit->setObjectName(QString::fromStdString("input_" + field));
  edit->setPlaceholderText(placeholder);
  edit->setToolTip(tip);
  lines_[field] = edit;
  connect(edit, &QLineEdit::textChanged, this, &InputsPanel::revalidate);
  return edit;
}

QWidget* InputsPanel::comboField(const std::string& field, const QStringList& items, bool editable, bool with_browse) {
  auto* box = new QComboBox;
  box->setObjectName(QString::fromStdString("input_" + field));
  box->setEditable(editable);
  box->addItems(items);
  box->setInsertPolicy(QComboBox::NoInsert);
  box->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  box->setMinimumContentsLength(12);
  combos_[field] = box;
  connect(box, &QComboBox::currentTextChanged, this, &InputsPanel::revalidate);
  if (!with_browse) return box;
  auto* row = new QWidget;
  auto* h = new QHBoxLayout(row);
  h->setContentsMargins(0, 0, 0, 0);
  h->addWidget(box, 1);
  auto* open = new QToolButton;
  open->setText("…");
  open->setToolTip(field == "model" ? "Open a model card or a Hugging Face config.json"
                                    : "Open a hardware profile JSON (datasheet or measured)");
  connect(open, &QToolButton::clicked, this, [this, field] { browse(field); });
  h->addWidget(open);
  return row;
}

void InputsPanel::buildForm() {
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(4, 4, 4, 4);
  auto group = [&](const QString& title, const std::vector<std::tuple<std::string, QString, QWidget*>>& rows) {
    auto* box = new QGroupBox(title);
    auto* form = new QFormLayout(box);
    form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    form->setVerticalSpacing(2);
    for (const auto& [field, label, widget] : rows) {
      auto* cell = new QWidget;
      auto* v = new QVBoxLayout(cell);
      v->setContentsMargins(0, 0, 0, 0);
      v->setSpacing(1);
      v->addWidget(widget);
      auto* err = new QLabel;
      err->setObjectName(QString::fromStdString("error_" + field));
      err->setWordWrap(true);
      err->setStyleSheet("color: #b00020;");
      err->setVisible(false);
      v->addWidget(err);
      errors_[field] = err;
      auto* lab = new QLabel(label);
      lab->setBuddy(widget->focusProxy() ? widget->focusProxy() : widget);
      form->addRow(lab, cell);
    }
    outer->addWidget(box);
  };
  group("Model and cluster",
        {{"model", "&Model", comboField("model", to_qt(simulator::builtin_model_names()), true, true)},
         {"hardware", "&Hardware", comboField("hardware", to_qt(simulator::builtin_hardware_names()), true, true)},
         {"nodes", "&Nodes",
          lineField("nodes", "4, 1,2,4 or 1-8", "Node counts: one, a list, or a range LO-HI (powers of two)")}});
  group(
      "Training",
      {{"seq_len", "Se&q. length", lineField("seq_len", "2048", "Tokens per sequence")},
       {"global_batch", "&Global batch",
        lineField("global_batch", "0 = smallest valid", "Sequences per step (list allowed)")},
       {"precision", "&Precision", comboField("precision", {"bf16", "fp16", "fp32", "bf16,fp16"}, true, false)},
       {"mixed_precision", "&Weights", comboField("mixed_precision", {"master_weights", "autocast"}, false, false)},
       {"attention", "Attent&ion", comboField("attention", {"flash", "flash1", "eager"}, false, false)},
       {"fusion", "F&usion", comboField("fusion", {"eager", "megatron", "compile"}, false, false)},
       {"grad_accum_dtype", "&Grad accumulation", comboField("grad_accum_dtype", {"param", "fp32"}, false, false)},
       {"packed_document_tokens", "Packed do&c tokens",
        lineField("packed_document_tokens", "0 = not packed", "Mean document tokens of packed sequences (cu_seqlens)")},
       {"fp8", "FP&8", comboField("fp8", {"auto", "none", "delayed", "tensorwise", "blockwise"}, true, false)},
       {"train_tokens", "Train &tokens",
        lineField("train_tokens", "e.g. 2e9 (0 = dataset x epochs)", "Tokens to train on")},
       {"dataset_tokens", "&Dataset tokens", lineField("dataset_tokens", "e.g. 5e8", "Dataset size in tokens")},
       {"epochs", "&Epochs", lineField("epochs", "1", "Epochs over the dataset")}});
  group("Context and expert parallelism",
        {{"cp", "Context para&llel", comboField("cp", {"auto", "1", "1,2,4,8"}, true, false)},
         {"cp_kind", "CP &kind", comboField("cp_kind", {"ring", "all_to_all"}, false, false)},
         {"ep", "E&xpert parallel", comboField("ep", {"auto", "1", "1,2,4,8"}, true, false)}});
  group("LoRA", {{"lora_rank", "&Rank", lineField("lora_rank", "0 = full fine-tuning", "LoRA rank r")},
                 {"lora_alpha", "&Alpha", lineField("lora_alpha", "16", "LoRA alpha")},
                 {"lora_dropout", "Dr&opout", lineField("lora_dropout", "0", "LoRA dropout probability")},
                 {"lora_targets", "Tar&gets",
                  lineField("lora_targets", "q_proj,v_proj (empty = default)", "PEFT target modules")},
                 {"lora_base", "Ba&se weights", comboField("lora_base", {"bf16", "nf4"}, false, false)}});
  group(
      "Objective and constraints",
      {{"objective", "O&bjective", comboField("objective", {"throughput", "time", "cost", "memory"}, false, false)},
       {"max_nodes", "Max nodes", lineField("max_nodes", "0 = no limit", "At most this many nodes")},
       {"max_usd_per_hour", "Max $/hour", lineField("max_usd_per_hour", "0 = no limit", "Cluster price per hour, US$")},
       {"max_tp", "Max TP", lineField("max_tp", "0 = devices per node", "Largest tensor-parallel degree")},
       {"headroom", "Headroom", lineField("headroom", "0.05", "Fraction of device memory kept free")},
       {"require", "Require", lineField("require", "pp,zero3,...", "Features every plan must use")},
       {"forbid", "Forbid", lineField("forbid", "offload,...", "Features no plan may use")}});
  outer->addStretch(1);
}

void InputsPanel::browse(const std::string& field) {
  const QString title = field == "model" ? "Open a model card or config.json" : "Open a hardware profile";
  const QString path = QFileDialog::getOpenFileName(this, title, {}, "JSON files (*.json);;All files (*)");
  if (path.isEmpty()) return;
  combos_.at(field)->setCurrentText(path);
}

PlanRequest InputsPanel::request() const {
  PlanRequest r;
  for (const auto& [field, edit] : lines_) r.*request_member(field) = edit->text().trimmed().toStdString();
  for (const auto& [field, box] : combos_) r.*request_member(field) = box->currentText().trimmed().toStdString();
  return r;
}

void InputsPanel::setRequest(const PlanRequest& r) {
  updating_ = true;
  for (const auto& [field, edit] : lines_) edit->setText(QString::fromStdString(r.*request_member(field)));
  for (const auto& [field, box] : combos_) {
    const QString text = QString::fromStdString(r.*request_member(field));
    if (box->isEditable()) box->setCurrentText(text);
    else box->setCurrentIndex(std::max(0, box->findText(text)));
  }
  updating_ = false;
  revalidate();
}

QString InputsPanel::errorText(const std::string& field) const {
  auto it = errors_.find(field);
  return it == errors_.end() || !it->second->isVisibleTo(this) ? QString() : it->second->text();
}

QLineEdit* InputsPanel::editor(const std::string& field) const {
  if (auto it = lines_.find(field); it != lines_.end()) return it->second;
  if (auto it = combos_.find(field); it != combos_.end()) return it->second->lineEdit();
  return nullptr;
}

void InputsPanel::revalidate() {
  if (updating_) return;
  const bool was = validation_.ok();
  validation_ = validate(request());
  for (const auto& [field, label] : errors_) {
    auto it = validation_.errors.find(field);
    const bool bad = it != validation_.errors.end();
    label->setText(bad ? QString::fromStdString(it->second) : QString());
    label->setVisible(bad);
    QWidget* w = lines_.count(field) ? static_cast<QWidget*>(lines_.at(field)) : combos_.at(field);
    w->setStyleSheet(bad ? "border: 1px solid #b00020;" : "");
    w->setAccessibleDescription(label->text());
  }
  emit requestChanged();
  if (was != validation_.ok()) emit validityChanged(validation_.ok());
}

}  // namespace shardplan::gui

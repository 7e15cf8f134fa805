#pragma once
// InputsPanel: the search inputs — model (built-in or a card / HF config.json file), hardware
// profile (built-in or file, measured ones too), nodes or a range, sequence length, global
// batch, precision, LoRA, token budget, objective and constraints. Every edit is validated at
// once with the CLI's parsers; the reason appears under the field and valid() turns false.
#include <QWidget>
#include <map>
#include <optional>

#include "plan_request.hpp"

class QComboBox;
class QLabel;
class QLineEdit;

namespace shardplan::gui {

class InputsPanel : public QWidget {
  Q_OBJECT
 public:
  explicit InputsPanel(QWidget* parent = nullptr);

  [[nodiscard]] PlanRequest request() const;
  void setRequest(const PlanRequest& r);
  [[nodiscard]] bool valid() const { return validation_.ok(); }
  [[nodiscard]] const Validation& validation() const { return validation_; }
  // The inline message under `field` ("" when the field is fine).
  [[nodiscard]] QString errorText(const std::string& field) const;
  // The editor of `field` (QLineEdit, or the QComboBox's line edit), for tests and focus.
  [[nodiscard]] QLineEdit* editor(const std::string& field) const;

 signals:
  void validityChanged(bool valid);
  void requestChanged();

 private:
  void revalidate();
  void browse(const std::string& field);
  QWidget* lineField(const std::string& field, const QString& placeholder, const QString& tip);
  QWidget* comboField(const std::string& field, const QStringList& items, bool editable, bool with_browse);
  void buildForm();

  std::map<std::string, QLineEdit*> lines_;
  std::map<std::string, QComboBox*> combos_;
  std::map<std::string, QLabel*> errors_;
  Validation validation_;
  bool updating_ = false;
};

}  // namespace shardplan::gui

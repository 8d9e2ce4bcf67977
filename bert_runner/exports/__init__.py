"""Raw-text SavedModels of the fine-tuning scripts' models besides the classifier's
(`bert_runner.export`): `squad` (question + context -> answer), `ner` (text -> entities) and
`swag` (context + endings -> probabilities). Each builds on `bert_runner.export.TextExport`."""

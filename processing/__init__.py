"""The PreprocessData step: a raw table or image tree checked, split and written as TFRecord shards with their manifests."""

"""`tsbatch`: submit a job to the tesserae-managed partition (held, requeueable, tagged with its metadata)."""

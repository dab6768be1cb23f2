"""Assets: what the chapters compute on and where. Downloads with pinned hashes (`downloads`),
the corpora (`corpora`), the models (`models`), the disk memo of expensive measurements (`memo`), the device (`devices`) and the
CPU's facts (`machine`)."""

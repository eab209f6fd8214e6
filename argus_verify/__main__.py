from argus_verify.cli import entry

entry()

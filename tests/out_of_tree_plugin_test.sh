#!/usr/bin/env bash
echo "oot: not yet"; exit 1

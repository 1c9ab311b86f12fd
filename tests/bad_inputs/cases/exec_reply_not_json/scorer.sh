#!/bin/sh
read line; echo "not json"

package cli

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

func (a *app) taskCmd() *cobra.Command {
	return group("task", "The task catalog: list, info", a.taskListCmd(), a.taskInfoCmd())
}

// taskJSON is a task for --json, services included.
type taskJSON struct {
	client.Task
	Services map[string]int64 `json:"services"`
}

func (a *app) taskListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the tasks environments can be created from",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, org, err := a.org()
			if err != nil {
				return err
			}
			tasks, err := c.ListTasks(cmd.Context(), org)
			if err != nil {
				return err
			}
			if a.json {
				out := make([]taskJSON, len(tasks))
				for i, t := range tasks {
					out[i] = taskJSON{t, t.Services}
				}
				return a.printJSON(out)
			}
			rows := make([][]string, len(tasks))
			for i, t := range tasks {
				rows[i] = []string{t.Ref, t.Version, t.Description}
			}
			return a.table([]string{"REF", "VERSION", "DESCRIPTION"}, rows)
		},
	}
}

func (a *app) taskInfoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "info <task_ref>",
		Short: "Show a task: description, inputs, services, instruction",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			c, org, err := a.org()
			if err != nil {
				return err
			}
			t, err := c.GetTask(cmd.Context(), org, argv[0])
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(taskJSON{*t, t.Services})
			}
			_ = a.fields("Task", t.Ref, "Version", t.Version, "Description", t.Description)
			if len(t.Inputs) > 0 {
				fmt.Fprintln(a.io.Out, "Inputs (dn env create --input NAME=VALUE):")
				names := sortedKeys(t.Inputs)
				rows := make([][]string, len(names))
				for i, n := range names {
					rows[i] = []string{"  " + n, strconv.Quote(t.Inputs[n].Default), t.Inputs[n].Description}
				}
				_ = a.table([]string{"  NAME", "DEFAULT", "DESCRIPTION"}, rows)
			}
			if len(t.Services) > 0 {
				fmt.Fprintln(a.io.Out, "Services:")
				for _, n := range sortedKeys(t.Services) {
					if p := t.Services[n]; p > 0 {
						fmt.Fprintf(a.io.Out, "  %s (port %d exposed)\n", n, p)
					} else {
						fmt.Fprintf(a.io.Out, "  %s\n", n)
					}
				}
			}
			if in := t.Instruction; in != "" {
				fmt.Fprintln(a.io.Out, "Instruction:")
				fmt.Fprintln(a.io.Out, indent(in, "  "))
			}
			return nil
		},
	}
}
